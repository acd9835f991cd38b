"""The module functions: each hands its options to the library in this process (the
native ``_native.evaluate``, ``ask``, ``compare``, ``score``: one library call each, no
command line) and returns the report the library made, the document the command prints
with ``--json``. Each option is a setting of the library under the flag's name in snake
case (``batch_size=8`` is ``--batch-size 8``, ``header=[...]`` repeats ``--header``);
``None`` (or leaving an option out) keeps the library's default, which is the flag's
(python/tests checks the two agree). Data given as a dict or rows is read in memory.
"""

import json
import os
import tempfile
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _native
from ._errors import GateFailed, UsageError

PathLike = Union[str, "os.PathLike[str]"]

# A switch given as False that has a flag of its own for "no".
_NEGATIONS = {"do-lower-case": "no-lower-case"}


class _Flag:
    """One flag of a command (``_native.flags``)."""

    def __init__(self, row: Tuple[str, bool, bool, Optional[str], List[str], str, bool]):
        self.long, self.takes_value, self.repeated, self.default, self.choices, self.help, self.hidden = row


class _Command:
    """A command's options: every flag its help shows, less those the function sets."""

    def __init__(self, function: str, command: str, fixed: Iterable[str]):
        self.function = function
        self.command = command
        fixed = set(fixed) | {"json", "quiet"}
        # The flags the help shows that are the function's options.
        self.flags: Dict[str, _Flag] = {}
        for row in _native.flags(command):
            flag = _Flag(row)
            name = flag.long.replace("-", "_")
            if not flag.hidden and name not in fixed:
                self.flags[name] = flag

    def document(self, function: Any) -> None:
        """Appends every option, its default and its help line to the docstring."""
        lines = [
            "",
            f"Options (the flags of ``bertqa {self.command}``, in snake case; None or",
            "left out: the flag's default):",
            "",
        ]
        for name, flag in self.flags.items():
            if flag.takes_value:
                default = "the command's choice" if flag.default in (None, "") else repr(flag.default)
            elif flag.long in _NEGATIONS:
                default = "True"
            else:
                default = "False"
            kind = " (repeatable: a list)" if flag.repeated else ""
            choices = f" [{', '.join(flag.choices)}]" if flag.choices and flag.takes_value else ""
            lines.append(f"    {name}{choices}{kind}: default {default}")
            lines.append(f"        {' '.join(flag.help.split())}")
        # Indented as the docstring's own lines, which inspect.cleandoc dedents.
        text = "\n".join(f"    {line}" if line else "" for line in lines)
        function.__doc__ = (function.__doc__ or "").rstrip() + "\n" + text + "\n"


def _data(data: Any) -> Any:
    """Data as the native functions take it: paths, or one file's bytes read in memory
    (``(bytes, "squad" | "rows", label)``)."""
    if isinstance(data, (str, os.PathLike)):
        return [os.fspath(data)]
    if isinstance(data, dict):
        return (json.dumps(data, ensure_ascii=False).encode(), "squad", "<dict>")
    rows = list(data)
    if rows and all(isinstance(r, (str, os.PathLike)) for r in rows):
        return [os.fspath(r) for r in rows]
    if not all(isinstance(r, dict) for r in rows):
        raise UsageError("data: give a path, a SQuAD dict, or a list of Hugging Face rows (dicts)")
    text = "\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
    return (text.encode(), "rows", "<rows>")


def _json(value: Any) -> Any:
    """A JSON file given as a path, or as a parsed object (its text, as bytes)."""
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    return json.dumps(value, ensure_ascii=False).encode()


def _warn(lines: List[str]) -> None:
    for line in lines:
        warnings.warn(line, stacklevel=3)


def _url_list(url: Union[None, str, Sequence[str]]) -> List[str]:
    if url is None:
        return []
    return [url] if isinstance(url, str) else [str(u) for u in url]


def evaluate(
    url: Union[None, str, Sequence[str]],
    model: Optional[str],
    data: Any,
    *,
    output_dir: Optional[PathLike] = None,
    progress: bool = False,
    **options: Any,
) -> Dict[str, Any]:
    """Evaluates ``model`` served at ``url`` on ``data``, as ``bertqa eval``.

    ``data``: a path (SQuAD JSON, Hugging Face rows, MRQA; gzipped or not), a list of
    paths, the parsed SQuAD dict, or a list of Hugging Face rows (dicts with ``id``,
    ``context``, ``question``, ``answers``). ``url``: ``host:port`` (a list spreads the
    requests over several endpoints); ``model`` None with ``from_logits``.

    Returns the dict that ``bertqa eval --json`` prints (the official metrics under
    ``"metrics"``) plus ``"predictions"`` (question id to answer text). With
    ``output_dir``, the command's files are written there (predictions.json,
    nbest_predictions.json, null_odds.json, metrics.json, per_question.jsonl); without,
    in a temporary folder that is removed. ``progress=True``: the progress bar on the
    process's stderr (when it is a terminal).

    Raises a subclass of :class:`bertqa.Error`; a failed gate (``min_exact``,
    ``min_f1``, ``max_p99_ms``) raises :class:`bertqa.GateFailed` once the report is
    complete, the report on the exception. Ctrl-C stops the run as it stops the command
    (requests in flight are drained, the journal kept in ``output_dir`` for
    ``resume=True``; without ``output_dir`` the temporary folder and its journal go),
    then raises KeyboardInterrupt.
    """
    with tempfile.TemporaryDirectory(prefix="bertqa-") as scratch:
        out = os.fspath(output_dir) if output_dir is not None else os.path.join(scratch, "eval")
        report, predictions, gates, lines = _native.evaluate(
            _url_list(url), model, _data(data), out, progress, options)
    _warn(lines)
    report["predictions"] = predictions
    if gates:
        raise GateFailed(gates, report)
    return report


def ask(
    url: Union[None, str, Sequence[str]],
    model: str,
    question: Union[str, Sequence[str]],
    context: Optional[str] = None,
    **options: Any,
) -> List[Dict[str, Any]]:
    """Asks ``question`` (a string, or a list of them) about ``context``, as ``bertqa ask``.

    Returns the answers, one per question: dicts with ``"question"``, ``"answer"`` (the
    text), ``"no_answer"``, ``"score"``, ``"probability"``, ``"start_char"`` and
    ``"end_char"`` (the answer's characters in the context), ``"null_odds"`` and the
    n-best list ``"nbest"`` (``n_best=K`` for K of them); a model that answers itself
    (text models of the answer contract) gives its own fields. The context may come from
    ``context_file`` instead.
    """
    questions = [question] if isinstance(question, str) else list(question)
    return _native.ask(_url_list(url), model, questions, context, options)["answers"]


def compare(
    models: Union[None, str, Sequence[Any]] = None,
    data: Any = None,
    *,
    runs: Optional[Sequence[PathLike]] = None,
    output_dir: Optional[PathLike] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Compares deployments of a model on ``data``, as ``bertqa compare``: each against
    the first, with the scores' differences, their intervals and p-values, and the
    answers that flipped.

    ``models``: a list of :class:`bertqa.Client` (each evaluates ``data``; the clients
    are compared in this process), or model names (``name@host:port`` picks a server per
    model; also the command's comma-separated string). ``runs``: instead of models, the
    directories of finished runs (``eval``'s output directories, or a model's directory
    of ``compare``'s). ``data`` as for :func:`evaluate`. Returns the dict that ``bertqa
    compare --json`` prints (for clients, its comparisons with each model's name and
    metrics, and ``"flips"``: the lines of flips.jsonl); with ``output_dir`` its files
    are kept there. A failed gate (``min_agreement``, ``max_logit_diff``,
    ``max_f1_drop``, ``fail_on_significant_drop``, ``max_flip_rate``,
    ``fail_if_concentrated``) raises
    :class:`bertqa.GateFailed` with the report on it.
    """
    if data is None:
        raise UsageError("compare(): give the data to compare on")
    if models is not None and not isinstance(models, str):
        models = list(models)
        if any(not isinstance(m, str) for m in models):
            return _compare_clients(models, data, output_dir, options)
    if (models is None) == (runs is None):
        raise UsageError("compare(): give models (names or clients) or runs (directories), one of them")
    spec = [models] if isinstance(models, str) else list(models or [])
    spec = [m.strip() for s in spec for m in s.split(",") if m.strip()]
    dirs = [os.fspath(r) for r in runs or []]
    with tempfile.TemporaryDirectory(prefix="bertqa-") as scratch:
        out = os.fspath(output_dir) if output_dir is not None else None
        if out is None and runs is None:
            # A comparison of models writes each model's files: here, for the call only.
            out = os.path.join(scratch, "compare")
        report, gates = _native.compare(spec, dirs, _data(data), out, options)
    _slice_tables(report)
    if gates:
        raise GateFailed(gates, report)
    return report


def _slice_tables(report: Dict[str, Any]) -> None:
    """Each comparison's ``slices`` as a :class:`bertqa.Table` (``to_pandas()``)."""
    from ._client import Table

    for c in report.get("comparisons", []):
        c["slices"] = Table(c.get("slices", []))


# What a comparison of clients takes of compare's options (the rest are the clients' own).
_CLIENT_COMPARE_OPTIONS = {
    "show", "bootstrap", "seed", "confidence", "min_agreement", "max_logit_diff",
    "max_f1_drop", "fail_on_significant_drop", "max_flip_rate", "fail_if_concentrated",
}


def _compare_clients(clients: List[Any], data: Any, output_dir: Optional[PathLike],
                     options: Dict[str, Any]) -> Dict[str, Any]:
    """``compare`` of clients: each evaluates ``data``, then the library compares them."""
    from ._client import Client

    for i, c in enumerate(clients):
        if not isinstance(c, Client):
            raise UsageError(f"compare(): models[{i}] is a {type(c).__name__}: give clients or names, not both")
    unknown = sorted(set(options) - _CLIENT_COMPARE_OPTIONS)
    if unknown:
        raise UsageError(
            f"compare(): {', '.join(unknown)} are settings of the clients when comparing clients "
            f"(compare takes {', '.join(sorted(_CLIENT_COMPARE_OPTIONS))})")
    names: List[str] = []
    for c in clients:
        name = str(c.model["name"])
        names.append(name if name not in names else f"{name}#{len(names) + 1}")
    evaluations = [c.evaluate(data) for c in clients]
    settings = {k: v for k, v in options.items() if v is not None}
    report = _native.compare_evaluations([e._native for e in evaluations], names, **settings)
    if output_dir is not None:
        out = os.fspath(output_dir)
        for name, evaluation in zip(names, evaluations):
            evaluation.write(os.path.join(out, name.replace("/", "_")))
        with open(os.path.join(out, "flips.jsonl"), "w", encoding="utf-8") as f:
            for line in report["flips"]:
                f.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        with open(os.path.join(out, "compare.json"), "w", encoding="utf-8") as f:
            json.dump({k: v for k, v in report.items() if k != "flips"}, f, indent=2, ensure_ascii=False)
            f.write("\n")
    _slice_tables(report)
    failed = [g for g in report["gates"] if not g["passed"]]
    if failed:
        raise GateFailed([_gate_words(g) for g in failed], report)
    return report


def _gate_words(g: Dict[str, Any]) -> str:
    """A failed gate as the command names it."""
    if g.get("slices"):
        return f"{g['flag']}: model {g['model']}'s changed answers concentrate in {', '.join(g['slices'])}"
    if g.get("score"):
        return f"{g['flag']} ({g['score']}): model {g['model']}'s interval lies below 0 (upper bound {g['value']})"
    return f"{g['flag']} {g['threshold']}: model {g['model']} measured {g['value']}"


def score(
    data: Any,
    predictions: Any,
    na_probs: Any = None,
    **options: Any,
) -> Dict[str, Any]:
    """Scores predictions with the official SQuAD evaluators, as ``bertqa score``.

    ``data`` as for :func:`evaluate`; ``predictions``: a predictions.json path or a dict
    (question id to answer text); ``na_probs``: SQuAD 2.0's no-answer odds, a
    null_odds.json path or a dict. Returns the dict that ``bertqa score --json`` prints
    (the official metrics under ``"metrics"``).
    """
    report, lines = _native.score(_data(data), _json(predictions),
                                  None if na_probs is None else _json(na_probs), options)
    _warn(lines)
    return report


_EVAL = _Command("evaluate", "eval", ["url", "model", "data", "output_dir"])
_ASK = _Command("ask", "ask", ["url", "model", "question", "context"])
_COMPARE = _Command("compare", "compare", ["models", "data", "output_dir", "runs"])
_SCORE = _Command("score", "score", ["data", "predictions", "na_prob_file"])
for _command, _function in ((_EVAL, evaluate), (_ASK, ask), (_COMPARE, compare), (_SCORE, score)):
    _command.document(_function)

# What a client sets of perf's and tune's flags (the library's list), and their data.
_FIXED_BY_CLIENT = _native.client_settings() + ["data", "output_dir"]
# `export_input_data` writes perf_analyzer's input file instead of a sweep: the command's.
_PERF = _Command("Client.perf", "perf", _FIXED_BY_CLIENT + ["export_input_data"])
_TUNE = _Command("Client.tune", "tune", _FIXED_BY_CLIENT + ["restore"])
