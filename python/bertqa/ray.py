"""bertqa in Ray Data: ``Answerer`` is the callable class for ``Dataset.map_batches``
(built once per actor: one :class:`bertqa.Client` each), ``evaluate`` scores a Dataset
of Hugging Face's SQuAD rows (``id``, ``question``, ``context``, ``answers``).
``pip install 'bertqa[ray]'``; see docs/scale.md."""

from __future__ import annotations

from typing import Any, Dict, Optional

try:
    import numpy as np
    import ray.data  # noqa: F401  (Ray Data is what the class is for)
except ImportError as e:  # pragma: no cover - the message is what is tested
    raise ImportError(
        f"bertqa.ray needs Ray Data ({e.name} is missing): pip install 'bertqa[ray]'") from None

from . import _engines
from ._errors import UsageError

# The columns an Answerer adds, in FIELDS' order.
COLUMNS = ("answer", "answer_start", "answer_end", "score", "probability", "no_answer",
           "null_odds")


class Answerer:
    """``ds.map_batches(bertqa.ray.Answerer, fn_constructor_kwargs={"url": url, "model":
    model, ...}, concurrency=N, batch_size=B)``: each batch's ``question`` and
    ``context`` columns answered, adding ``answer``, ``answer_start``, ``answer_end``
    (character offsets), ``score``, ``probability``, ``no_answer`` and ``null_odds`` (a
    null question or context: null answer columns). The other keyword arguments are
    :class:`bertqa.Client`'s; ``rows_per_call`` rows are asked at a time (``None``:
    the whole batch in one call, for throughput). The client is shared by threads, so
    ``map_batches(..., max_concurrency=2)`` lets an actor answer its next batch while
    the last requests of one are in flight."""

    def __init__(self, url: Any, model: str, *, rows_per_call: Optional[int] = 64,
                 **client_options: Any) -> None:
        _engines.check_rows_per_call("Answerer()", rows_per_call)
        self.rows_per_call = rows_per_call
        self.client = _engines.client(url, model, client_options)

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        for key in ("question", "context"):
            if key not in batch:
                raise UsageError(f"Answerer: the batch has no {key!r} column")
        got = _engines.answer_batch(self.client, list(batch["question"]), list(batch["context"]),
                                    self.rows_per_call)
        out = dict(batch)
        columns = list(zip(*[_engines.fields(a) for a in got])) or [()] * len(COLUMNS)
        for name, values in zip(COLUMNS, columns):
            out[name] = np.array(values, dtype=object)
        return out


def evaluate(ds: Any, url: Any, model: str, *, concurrency: int = 2, batch_size: int = 1024,
             rows_per_call: Optional[int] = None, version_2_with_negative: Optional[bool] = None,
             na_prob_thresh: float = 1.0, **client_options: Any) -> Any:
    """Evaluates ``model`` on a Dataset of Hugging Face's SQuAD rows: the answers computed
    by ``concurrency`` actors (``Answerer``; batches of ``batch_size`` rows, each asked
    in one call unless ``rows_per_call`` is given, two batches at once per actor), scored
    once here as the official scripts score them, into a :class:`bertqa.Evaluation` (the
    metrics of ``Client.evaluate`` of the same rows). A row without a question, context
    or answers is an error naming its id."""
    if version_2_with_negative is None:
        # SQuAD 2.0's rules when a question has no answer, as Client.evaluate decides.
        unanswerable = ds.filter(lambda r: len(r["answers"]["text"]) == 0).limit(1).count()
        version_2_with_negative = unanswerable > 0
    client_options = dict(client_options, version_2_with_negative=version_2_with_negative)
    answered = ds.map_batches(
        Answerer,
        fn_constructor_kwargs=dict(url=url, model=model, rows_per_call=rows_per_call,
                                   **client_options),
        concurrency=concurrency, batch_size=batch_size, max_concurrency=2)
    answers = {}
    golds = []
    for row in answered.iter_rows():
        plain = _plain(row)
        _engines.check_row(plain)
        answers[str(plain["id"])] = (row["answer"], row["null_odds"])
        golds.append(_engines.gold(plain))
    return _engines.evaluation(golds, answers, "<ray Dataset>", version_2_with_negative,
                               na_prob_thresh)


def _plain(row: Dict[str, Any]) -> Dict[str, Any]:
    """A row's Hugging Face fields as plain Python values (numpy arrays as lists)."""
    answers = row.get("answers")
    if isinstance(answers, dict):
        answers = {k: list(v) if v is not None else [] for k, v in answers.items()}
    return {"id": row.get("id"), "question": row.get("question"), "context": row.get("context"),
            "answers": answers}
