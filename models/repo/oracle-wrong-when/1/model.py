# Test model of bertqa: the shared implementation lives in models/lib/qa_model.py and
# reads its behaviour from this model's config.pbtxt.
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "lib"))
from qa_model import TritonPythonModel  # noqa: E402,F401
