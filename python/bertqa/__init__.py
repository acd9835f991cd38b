"""bertqa: BERT extractive question answering (SQuAD) against NVIDIA Triton Inference
Server, from Python.

:class:`Client` holds one model on one or more servers: built once (it connects,
looks at the model and loads the tokenizer), then asked questions (``ask``,
``ask_many``, ``ask_async``, or called as transformers' question-answering pipeline)
and given data to evaluate.

The functions run bertqa's own code in this process (the GIL released while they
work): :func:`ask`, :func:`evaluate`, :func:`compare` and :func:`score`, each named
after its command, with the command's flags as options in snake case and the flags'
defaults. Failures raise a subclass of :class:`Error`, one per exit reason of the
command line. The ``bertqa`` command installed with the package is the command line
itself. See docs/python.md.
"""

from . import _native
from ._api import ask, compare, evaluate, score
from ._client import Answer, Candidate, Client, Evaluation, Table
from ._errors import (
    ConnectionError,
    Error,
    GateFailed,
    InputError,
    ModelError,
    ServerError,
    UsageError,
)

__version__: str = _native.__version__

__all__ = [
    "Client",
    "Answer",
    "Candidate",
    "Evaluation",
    "Table",
    "ask",
    "compare",
    "evaluate",
    "score",
    "Error",
    "UsageError",
    "InputError",
    "ConnectionError",
    "ServerError",
    "ModelError",
    "GateFailed",
    "__version__",
]
