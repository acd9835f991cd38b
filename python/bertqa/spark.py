"""bertqa in Spark: ``answer_udf`` answers a DataFrame's (question, context) rows on
the executors, one :class:`bertqa.Client` per Python worker reused by every batch and
task it runs; ``evaluate`` scores a DataFrame of Hugging Face's SQuAD rows (``id``,
``question``, ``context``, ``answers``). ``pip install 'bertqa[spark]'``; see
docs/scale.md."""

from __future__ import annotations

from typing import Any, Callable, Optional

try:
    import pandas as pd
    from pyspark.sql import Column, DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
except ImportError as e:  # pragma: no cover - the message is what is tested
    raise ImportError(
        f"bertqa.spark needs pyspark with pandas and pyarrow ({e.name} is missing): "
        "pip install 'bertqa[spark]'") from None

from . import _engines
from ._errors import UsageError

# The answer's struct: character offsets in the context, as `ask --json`'s.
ANSWER = T.StructType([
    T.StructField("text", T.StringType()),
    T.StructField("start", T.IntegerType()),
    T.StructField("end", T.IntegerType()),
    T.StructField("score", T.DoubleType()),
    T.StructField("probability", T.DoubleType()),
    T.StructField("no_answer", T.BooleanType()),
    T.StructField("null_odds", T.DoubleType()),
])


def answer_udf(url: Any, model: str, *, rows_per_call: Optional[int] = 64,
               **client_options: Any) -> Callable[[Any, Any], Column]:
    """A function of two string columns (question, context) giving the answer struct
    (``text``, ``start``, ``end``, ``score``, ``probability``, ``no_answer``,
    ``null_odds``): ``df.withColumn("answer", answer_udf(url, model)("question",
    "context"))``. A null question or context gives a null answer. Spark hands the
    function batches of rows (``spark.sql.execution.arrow.maxRecordsPerBatch``); each
    is asked ``rows_per_call`` rows at a time (``None``: the whole batch in one call,
    for throughput), in requests of the client's own ``batch_size``.
    ``client_options``: :class:`bertqa.Client`'s (TLS, headers, several URLs, retries,
    tokenizer, ...). A failing server fails the job with bertqa's message."""
    _engines.check_rows_per_call("answer_udf()", rows_per_call)

    @F.pandas_udf(ANSWER)  # type: ignore[call-overload]
    def answers(questions: pd.Series, contexts: pd.Series) -> pd.DataFrame:
        client = _engines.client(url, model, client_options)
        got = _engines.answer_batch(client, list(questions), list(contexts), rows_per_call)
        return pd.DataFrame([_engines.fields(a) for a in got], columns=list(_engines.FIELDS))

    def udf(question: Any, context: Any) -> Column:
        q, c = _column(question), _column(context)
        return F.when(q.isNull() | c.isNull(), F.lit(None).cast(ANSWER)).otherwise(answers(q, c))

    return udf


def _column(c: Any) -> Column:
    return F.col(c) if isinstance(c, str) else c


def evaluate(df: DataFrame, url: Any, model: str, *, rows_per_call: Optional[int] = None,
             version_2_with_negative: Optional[bool] = None, na_prob_thresh: float = 1.0,
             **client_options: Any) -> Any:
    """Evaluates ``model`` on a DataFrame of Hugging Face's SQuAD rows (``id``,
    ``question``, ``context``, ``answers``): the answers computed on the executors
    (``answer_udf``, each of Spark's batches in one call unless ``rows_per_call`` is
    given), scored once on the driver as the official scripts score them, into
    a :class:`bertqa.Evaluation` (the metrics of ``Client.evaluate`` of the same rows;
    no latency, windows or n-best lists). A row without a question, context or answers
    is an error naming its id."""
    needed = ["id", "question", "context", "answers"]
    absent = [c for c in needed if c not in df.columns]
    if absent:
        raise UsageError(f"evaluate(): the DataFrame has no {', '.join(absent)} column")
    if version_2_with_negative is None:
        # SQuAD 2.0's rules when a question has no answer, as Client.evaluate decides.
        unanswerable = df.filter(F.size(F.col("answers.text")) == 0).limit(1).count()
        version_2_with_negative = unanswerable > 0
    client_options = dict(client_options, version_2_with_negative=version_2_with_negative)
    udf = answer_udf(url, model, rows_per_call=rows_per_call, **client_options)
    # Not the contexts: only whether each row has one (the driver would hold the data).
    rows = df.select("id", "question", "answers", F.col("context").isNull().alias("_no_context"),
                     udf("question", "context").alias("_answer")).collect()
    answers = {}
    golds = []
    for r in rows:
        row = r.asDict(recursive=True)
        row["context"] = None if row.pop("_no_context") else ""
        _engines.check_row(row)
        a = row.pop("_answer")
        answers[str(row["id"])] = (a["text"], a["null_odds"])
        golds.append(_engines.gold(row))
    return _engines.evaluation(golds, answers, "<spark DataFrame>", version_2_with_negative,
                               na_prob_thresh)
