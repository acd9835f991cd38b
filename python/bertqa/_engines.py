"""What ``bertqa.spark`` and ``bertqa.ray`` share: one client per worker process,
answers as the engines' columns, and the evaluation of answers computed by the workers
(scored once, on the caller's side)."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ._errors import UsageError

# One client per worker process and settings, reused by every batch and task the
# process runs (a client per batch would connect and load the tokenizer each time).
_CLIENTS: Dict[str, Any] = {}
# How many clients of each key this process has built (one, unless building failed).
BUILT: Dict[str, int] = {}


def key_of(url: Any, model: str, options: Dict[str, Any]) -> str:
    return json.dumps([url, model, options], sort_keys=True, default=str)


def client(url: Any, model: str, options: Dict[str, Any]) -> Any:
    """This process's client of ``url`` and ``model`` with ``options``, built once."""
    key = key_of(url, model, options)
    built = _CLIENTS.get(key)
    if built is None:
        from ._client import Client

        BUILT[key] = BUILT.get(key, 0) + 1
        built = _CLIENTS[key] = Client(url, model, **options)
    return built


def missing(value: Any) -> bool:
    """A null cell: None, or a float NaN (how pandas and numpy hold a missing string)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


# Calls of ``rows_per_call`` rows kept in flight at once by one worker: the client's own
# requests then overlap from one call to the next instead of draining at each call's end.
CALLS_IN_FLIGHT = 4


def check_rows_per_call(caller: str, rows_per_call: Optional[int]) -> None:
    """``rows_per_call`` is a positive count, or ``None`` (the engine's whole batch)."""
    if rows_per_call is not None and rows_per_call < 1:
        raise UsageError(f"{caller}: rows_per_call {rows_per_call}: give at least 1, "
                         "or None for one call per batch")


def answer_batch(client_: Any, questions: Sequence[Any], contexts: Sequence[Any],
                 rows_per_call: Optional[int]) -> List[Optional[Any]]:
    """Each row's answer (``None`` for a row whose question or context is null), asked
    ``rows_per_call`` rows a call (``None``: the whole batch in one call), up to
    CALLS_IN_FLIGHT calls at once (the client is shared by threads)."""
    out: List[Optional[Any]] = [None] * len(questions)
    asked = [i for i in range(len(questions)) if not (missing(questions[i]) or missing(contexts[i]))]
    step = rows_per_call or max(1, len(asked))
    chunks = [asked[s:s + step] for s in range(0, len(asked), step)]

    def call(chunk: List[int]) -> List[Any]:
        return client_.ask_many([(str(questions[i]), str(contexts[i])) for i in chunk])

    if len(chunks) <= 1:
        answered = [call(c) for c in chunks]
    else:
        with ThreadPoolExecutor(min(CALLS_IN_FLIGHT, len(chunks))) as pool:
            answered = list(pool.map(call, chunks))
    for chunk, answers in zip(chunks, answered):
        for i, a in zip(chunk, answers):
            out[i] = a
    return out


# The answer's fields as the engines' columns (Spark's struct fields, Ray's columns).
FIELDS = ("text", "start", "end", "score", "probability", "no_answer", "null_odds")


def fields(answer: Optional[Any]) -> Tuple[Any, ...]:
    """An answer's fields in FIELDS' order (all None for no answer)."""
    if answer is None:
        return (None,) * len(FIELDS)
    return (answer.text, answer.start_char, answer.end_char, answer.score, answer.probability,
            answer.no_answer, answer.null_odds)


def check_row(row: Dict[str, Any]) -> None:
    """A row of Hugging Face's SQuAD shape, or a UsageError naming it by its id."""
    rid = row.get("id")
    if missing(rid):
        raise UsageError(f"evaluate(): a row has no id: {_short(row)}")
    for key in ("question", "context"):
        if missing(row.get(key)):
            raise UsageError(f"evaluate(): row {rid!r} has no {key}")
    answers = row.get("answers")
    if not isinstance(answers, dict) or "text" not in answers or "answer_start" not in answers:
        raise UsageError(f"evaluate(): row {rid!r} has no answers "
                         "(a dict of lists `text` and `answer_start`, empty for no answer)")


def _short(row: Dict[str, Any]) -> str:
    text = repr({k: row[k] for k in list(row)[:3]})
    return text if len(text) < 120 else text[:117] + "..."


def gold(row: Dict[str, Any]) -> Dict[str, Any]:
    """What scoring keeps of a checked row: its id, question and answers' texts. Not its
    context or offsets: the official scoring reads the texts alone, and a driver holding
    every context of a large job would hold the whole data."""
    return {"id": str(row["id"]), "question": str(row["question"]),
            "answers": [str(t) for t in row["answers"]["text"]]}


def evaluation(golds: Iterable[Dict[str, Any]], answers: Dict[str, Tuple[str, Optional[float]]],
               label: str, version_2_with_negative: Optional[bool], na_prob_thresh: float) -> Any:
    """A :class:`bertqa.Evaluation` of ``answers`` (id → text, null odds) to ``golds``
    (each row's :func:`gold`), scored once as the official scripts score them."""
    from . import _native
    from ._client import Evaluation

    lines = []
    for row in golds:
        # Hugging Face's row shape, its context left empty and its offsets unknown.
        lines.append(json.dumps({
            "id": row["id"], "question": row["question"], "context": "",
            "answers": {"text": row["answers"], "answer_start": [None] * len(row["answers"])},
        }))
    native = _native.evaluation_of_answers("\n".join(lines).encode(), label, answers,
                                           version_2_with_negative, na_prob_thresh)
    return Evaluation(native)
