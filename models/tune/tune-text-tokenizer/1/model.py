# Text model of bertqa's test bed: the shared implementation lives in
# models/lib/qa_text_model.py and reads its role from this model's config.pbtxt.
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "lib"))
from qa_text_model import TritonPythonModel  # noqa: E402,F401
