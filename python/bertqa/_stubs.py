"""Writes the package's type stubs (``__init__.pyi``) from the commands' flags:
``python -m bertqa._stubs > python/bertqa/__init__.pyi``. The tests check that the
committed stubs are what this writes, so that they list every option of each command.
"""

import inspect
import sys
from typing import Any, List, Sequence

from . import _api, _client

_HEAD = '''"""Type stubs of the bertqa package (written by ``python -m bertqa._stubs``)."""

import os
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Sequence, Tuple, Union

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
        "models: Union[None, str, Sequence[str], Sequence[Client]] = None, data: Any = None, *, "
        "runs: Optional[Sequence[PathLike]] = None, output_dir: Optional[PathLike] = None",
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


_ANSWERS = '''
class Candidate:
    """One of a question's best candidates."""
    text: str
    start_char: Optional[int]
    end_char: Optional[int]
    probability: float
    start_logit: float
    end_logit: float


class Answer:
    """A question's answer (``start_char``/``end_char``: a span of the context, in
    characters; ``placeholder``: the text is the reference's ``"empty"`` for no valid
    span, not the word; ``nbest``: ``None`` where the model's contract gives none)."""
    id: str
    text: str
    start_char: Optional[int]
    end_char: Optional[int]
    score: Optional[float]
    probability: Optional[float]
    no_answer: bool
    placeholder: bool
    null_odds: Optional[float]
    no_answer_probability: Optional[float]
    nbest: Optional[List[Candidate]]
'''


def _annotation(a: Any) -> str:
    # _client.py's annotations are its source text (``from __future__ import annotations``).
    return a if isinstance(a, str) else inspect.formatannotation(a)


def _params(function: Any, var_keyword: bool = True) -> List[str]:
    """A function's parameters as a stub writes them (``**kwargs`` left out unless
    ``var_keyword``), a ``*`` before the first keyword-only one."""
    params: List[str] = []
    star = False
    for p in inspect.signature(function).parameters.values():
        if p.kind is p.VAR_KEYWORD and not var_keyword:
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text, star = "*" + p.name, True
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + p.name
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
    return params


def _returns(function: Any) -> str:
    sig = inspect.signature(function)
    return "" if sig.return_annotation is sig.empty else f" -> {_annotation(sig.return_annotation)}"


def _signature(function: Any) -> str:
    params, returns = _params(function), _returns(function)
    one_line = f"({', '.join(params)}){returns}"
    if len(one_line) <= 80:
        return one_line
    return "(\n" + "".join(f"        {p},\n" for p in params) + f"    ){returns}"


def _class(cls: Any, dunders: Sequence[str]) -> List[str]:
    """A class's stub: its public methods and properties (and ``dunders``), from their
    definitions, under the first paragraph of its docstring."""
    summary = " ".join((cls.__doc__ or "").split("\n\n")[0].split())
    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    head = f"{cls.__name__}({', '.join(bases)})" if bases else cls.__name__
    out = [f"\n\nclass {head}:", f'    """{summary}"""']
    for name, member in cls.__dict__.items():
        if name.startswith("_") and name not in dunders:
            continue
        if isinstance(member, property):
            returns = inspect.signature(member.fget).return_annotation
            kind = "Any" if returns is inspect.Signature.empty else _annotation(returns)
            out.append(f"    @property\n    def {name}(self) -> {kind}: ...")
        elif name in _CLIENT_COMMANDS:
            out.append(_client_command(name, member, _CLIENT_COMMANDS[name]))
        elif inspect.isfunction(member):
            prefix = "async def" if inspect.iscoroutinefunction(member) else "def"
            out.append(f"    {prefix} {name}{_signature(member)}: ...")
    return out


# The client's methods that run a command: their options are the command's flags.
_CLIENT_COMMANDS = {"perf": _api._PERF, "tune": _api._TUNE}


def _client_command(name: str, method: Any, command: "_api._Command") -> str:
    """A method's stub with each of the command's options typed, as the functions'."""
    fixed = _params(method, var_keyword=False)
    if "*" not in fixed:
        fixed.append("*")
    options = [f"{n}: {_type(f)}" for n, f in command.flags.items()]
    body = "".join(f"        {p},\n" for p in fixed + options)
    return f"    def {name}(\n{body}    ){_returns(method)}: ..."


def stubs() -> str:
    out: List[str] = [_HEAD, _ANSWERS]
    out += _class(_client.Table, ())
    out += _class(_client.Evaluation, ())
    out += _class(_client.Client, ("__init__", "__call__", "__enter__", "__exit__"))
    out.append("")
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
