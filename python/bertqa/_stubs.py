"""Writes the package's type stubs (``__init__.pyi``) from the commands' flags:
``python -m bertqa._stubs > python/bertqa/__init__.pyi``. The tests check that the
committed stubs are what this writes, so that they list every option of each command.
"""

import sys
from typing import List

from . import _api

_HEAD = '''"""Type stubs of the bertqa package (written by ``python -m bertqa._stubs``)."""

import os
from typing import Any, Dict, List, Literal, Optional, Sequence, Union

from ._errors import (
    ConnectionError as ConnectionError,
    Error as Error,
    GateFailed as GateFailed,
    InputError as InputError,
    ModelError as ModelError,
    ServerError as ServerError,
    UsageError as UsageError,
)

__version__: str

PathLike = Union[str, os.PathLike[str]]
Urls = Union[None, str, Sequence[str]]
Value = Union[str, int, float, os.PathLike[str]]
'''

_SIGNATURES = {
    "evaluate": (
        "url: Urls, model: Optional[str], data: Any, *, output_dir: Optional[PathLike] = None, "
        "progress: bool = False",
        "Dict[str, Any]",
    ),
    "ask": (
        "url: Urls, model: str, question: Union[str, Sequence[str]], context: Optional[str] = None, *",
        "List[Dict[str, Any]]",
    ),
    "compare": (
        "models: Union[str, Sequence[str]], data: Any, *, output_dir: Optional[PathLike] = None",
        "Dict[str, Any]",
    ),
    "score": ("data: Any, predictions: Any, na_probs: Any = None, *", "Dict[str, Any]"),
}


def _type(flag: "_api._Flag") -> str:
    if flag.long in _api._NEGATIONS:
        return "Optional[bool] = None"
    if not flag.takes_value:
        return "bool = False"
    if flag.choices:
        choices = ", ".join(repr(c) for c in flag.choices)
        one = f"Literal[{choices}]"
    else:
        one = _scalar(flag.default)
    if flag.repeated:
        return f"Union[{one}, Sequence[{one}], None] = None"
    return f"Optional[{one}] = None"


def _scalar(default: "str | None") -> str:
    for kind, name in ((int, "int"), (float, "float")):
        try:
            kind(default)  # type: ignore[arg-type]
            return name
        except (TypeError, ValueError):
            pass
    return "Value"


def stubs() -> str:
    out: List[str] = [_HEAD]
    commands = {"evaluate": _api._EVAL, "ask": _api._ASK, "compare": _api._COMPARE, "score": _api._SCORE}
    for function, command in commands.items():
        params, returns = _SIGNATURES[function]
        out.append(f"\ndef {function}(\n    {params},")
        for name, flag in command.flags.items():
            out.append(f"    {name}: {_type(flag)},")
        out.append(f") -> {returns}:\n    \"\"\"See ``help(bertqa.{function})`` and docs/python.md.\"\"\"\n")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(stubs())
