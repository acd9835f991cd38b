"""bertqa.spark and bertqa.ray on the real engines: pyspark in local mode (`local[2]`)
and Ray's own local cluster, against the test Triton. Their answers equal
`Client.ask_many`'s field for field, their evaluations `Client.evaluate`'s metrics, each
worker holds one client however many batches it answers, the client's options reach the
workers' clients (a header a gateway requires), and a dead server fails the job with
bertqa's message."""

import importlib
import json
import os
import re
import sys

import pytest

import bertqa
from conftest import ROOT, SAMPLE

VOCAB = str(ROOT / "vocab" / "vocab.txt")
FIELDS = ("text", "start", "end", "score", "probability", "no_answer", "null_odds")


def rows_of(path, copies=1):
    """A SQuAD file's questions as Hugging Face's rows; `copies` > 1 repeats them under
    other ids."""
    data = json.loads(path.read_text())
    rows = []
    for k in range(copies):
        for article in data["data"]:
            for p in article["paragraphs"]:
                for q in p["qas"]:
                    rows.append({
                        "id": q["id"] if k == 0 else f"{q['id']}#{k}",
                        "question": q["question"],
                        "context": p["context"],
                        "answers": {"text": [a["text"] for a in q["answers"]],
                                    "answer_start": [a["answer_start"] for a in q["answers"]]},
                    })
    return rows


SAMPLE_ROWS = rows_of(SAMPLE)
# A few thousand questions, several windows for some.
MANY_ROWS = rows_of(ROOT / "tests" / "compare-data" / "compare-1200.json", copies=2)


# Every kind of model: a token model, a family model by its tokenizer.json (run_qa's
# rules), a text model of each contract; each with its client options.
KINDS = [
    ("oracle-bpe", {"tokenizer": str(ROOT / "tests" / "fixtures" / "tokenizers" / "roberta")}),
    ("oracle-text-logits", {}),
    ("oracle-text-answer", {}),
]


def expected(grpc_url, rows, model="oracle", **options):
    """`Client.ask_many`'s answers to the rows, by id, as the engines' fields."""
    client = bertqa.Client(grpc_url, model, **(options or {"vocab": VOCAB}))
    answers = client.ask_many([(r["question"], r["context"]) for r in rows])
    return {r["id"]: (a.text, a.start_char, a.end_char, a.score, a.probability, a.no_answer,
                      a.null_odds) for r, a in zip(rows, answers)}


def dead_url_message():
    """What bertqa.ConnectionError says of a dead server."""
    with pytest.raises(bertqa.ConnectionError) as e:
        bertqa.Client("127.0.0.1:1", "oracle", vocab=VOCAB, retries=0)
    return str(e.value)


KEY = ("x-api-key", "engines-key")


@pytest.fixture(scope="module")
def keyed_http(http_url):
    """A gateway in front of the test Triton's HTTP port that forwards only the requests
    carrying KEY's header and answers the rest 401: its host:port."""
    import http.client
    import http.server
    import threading

    host, port = http_url.rsplit(":", 1)

    class Gateway(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get(KEY[0]) != KEY[1]:
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            upstream = http.client.HTTPConnection(host, int(port), timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != KEY[0]}
            upstream.request(self.command, self.path, body=body, headers=headers)
            got = upstream.getresponse()
            data = got.read()
            self.send_response(got.status)
            for k, v in got.getheaders():
                if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            upstream.close()

        do_GET = do_POST = forward

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_client_options_reach_the_workers_client(spark, ray_data, keyed_http, grpc_url):
    """A header the gateway requires, given as a client option, is sent by the workers'
    clients (answers as ask_many's); without it the gateway's refusal fails the job."""
    import bertqa.ray
    import bertqa.spark

    keyed = dict(protocol="http", header={KEY[0]: KEY[1]}, vocab=VOCAB, retries=0)
    want = expected(grpc_url, SAMPLE_ROWS)
    udf = bertqa.spark.answer_udf(keyed_http, "oracle", **keyed)
    got = spark_rows(spark, SAMPLE_ROWS).select("id", udf("question", "context").alias("a"))
    for r in got.collect():
        assert tuple(r["a"][f] for f in FIELDS) == want[r["id"]], r["id"]
    got = ray_rows(SAMPLE_ROWS).map_batches(
        bertqa.ray.Answerer, fn_constructor_kwargs=dict(url=keyed_http, model="oracle", **keyed),
        concurrency=1, batch_size=8).take_all()
    for r in got:
        assert tuple(r[c] for c in RAY_COLUMNS) == want[r["id"]], r["id"]
    unkeyed = dict(keyed, header=None)
    udf = bertqa.spark.answer_udf(keyed_http, "oracle", **unkeyed)
    with pytest.raises(Exception, match="401"):
        spark_rows(spark, SAMPLE_ROWS[:4]).select(udf("question", "context")).collect()


# -- Spark ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark():
    import pyspark.sql as pyspark_sql
    # The executors' Python is this one, where the wheel is installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (pyspark_sql.SparkSession.builder.master("local[2]")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               # Small Arrow batches: many batches per worker.
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "16")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def spark_rows(spark, rows, partitions=4):
    return spark.createDataFrame(rows).repartition(partitions)


def test_spark_answers_equal_ask_many_field_for_field(spark, grpc_url):
    import bertqa.spark
    from pyspark.sql import functions as F

    # Calls of 24 rows, and one call per batch.
    for rows_per_call in (24, None):
        udf = bertqa.spark.answer_udf(grpc_url, "oracle", rows_per_call=rows_per_call, vocab=VOCAB)
        for rows in (SAMPLE_ROWS, MANY_ROWS):
            got = spark_rows(spark, rows).select("id", udf("question", "context").alias("a")).collect()
            want = expected(grpc_url, rows)
            assert len(got) == len(rows)
            for r in got:
                assert tuple(r["a"][f] for f in FIELDS) == want[r["id"]], (rows_per_call, r["id"])
    with pytest.raises(bertqa.UsageError, match="rows_per_call 0: give at least 1, or None"):
        bertqa.spark.answer_udf(grpc_url, "oracle", rows_per_call=0)
    # A null question or context gives a null answer.
    df = spark.createDataFrame([("q?", None), (None, "c"), ("Who?", "Ann met Bob.")],
                               "question string, context string")
    answers = [r["a"] for r in df.select(udf(F.col("question"), "context").alias("a")).collect()]
    assert answers[0] is None and answers[1] is None and answers[2]["text"]


def test_spark_and_ray_answer_as_ask_many_for_every_kind_of_model(spark, ray_data, grpc_url):
    import bertqa.ray
    import bertqa.spark

    for model, options in KINDS:
        want = expected(grpc_url, SAMPLE_ROWS, model, **options)
        udf = bertqa.spark.answer_udf(grpc_url, model, **options)
        got = spark_rows(spark, SAMPLE_ROWS).select("id", udf("question", "context").alias("a"))
        for r in got.collect():
            assert tuple(r["a"][f] for f in FIELDS) == want[r["id"]], (model, r["id"])
        got = ray_rows(SAMPLE_ROWS).map_batches(
            bertqa.ray.Answerer, fn_constructor_kwargs=dict(url=grpc_url, model=model, **options),
            concurrency=1, batch_size=8).take_all()
        for r in got:
            assert tuple(r[c] for c in RAY_COLUMNS) == want[r["id"]], (model, r["id"])


def test_spark_keeps_one_client_per_worker(spark, grpc_url):
    import bertqa.spark
    import pandas as pd
    from pyspark.sql import functions as F

    udf = bertqa.spark.answer_udf(grpc_url, "oracle", vocab=VOCAB)
    df = spark_rows(spark, MANY_ROWS, partitions=8)
    batches = len(MANY_ROWS) // 16
    assert df.select(udf("question", "context").alias("a")).filter("a is not null").count() == len(MANY_ROWS)

    @F.pandas_udf("string")
    def built(ids: pd.Series) -> pd.Series:
        from bertqa import _engines
        count = _engines.BUILT.get(_engines.key_of(grpc_url, "oracle", {"vocab": VOCAB}), 0)
        return pd.Series([f"{os.getpid()}:{count}"] * len(ids))

    seen = {r["w"] for r in df.select(built("id").alias("w")).distinct().collect()}
    pids = {s.split(":")[0] for s in seen}
    # Two Python workers (local[2]) answered every batch; each built the client once.
    assert 1 <= len(pids) <= 2 < batches, seen
    assert all(s.endswith(":1") for s in seen), seen


def test_spark_evaluate_equals_client_evaluate(spark, grpc_url):
    import bertqa.spark

    client = bertqa.Client(grpc_url, "oracle", vocab=VOCAB)
    for rows in (SAMPLE_ROWS, MANY_ROWS[:600]):
        evaluation = bertqa.spark.evaluate(spark_rows(spark, rows), grpc_url, "oracle", vocab=VOCAB)
        assert isinstance(evaluation, bertqa.Evaluation)
        assert evaluation.metrics == client.evaluate(rows).metrics
        assert evaluation.predictions == client.evaluate(rows).predictions
    # A row without its context is named by its id.
    broken = [dict(SAMPLE_ROWS[0]), dict(SAMPLE_ROWS[1], context=None)]
    df = spark.createDataFrame(broken, "id string, question string, context string, "
                               "answers struct<text: array<string>, answer_start: array<int>>")
    with pytest.raises(bertqa.UsageError, match=f"row '{SAMPLE_ROWS[1]['id']}' has no context"):
        bertqa.spark.evaluate(df, grpc_url, "oracle", vocab=VOCAB)


def test_spark_job_fails_with_bertqas_message_on_a_dead_server(spark):
    import bertqa.spark

    udf = bertqa.spark.answer_udf("127.0.0.1:1", "oracle", vocab=VOCAB, retries=0)
    df = spark.createDataFrame(SAMPLE_ROWS[:4])
    with pytest.raises(Exception) as failed:
        df.select(udf("question", "context")).collect()
    assert dead_url_message() in str(failed.value)


# -- Ray --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def ray_data():
    import ray
    import ray.data

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    ray.shutdown()


def ray_rows(rows):
    """The rows as a Dataset of an explicit schema (empty answer lists typed)."""
    import pyarrow as pa
    import ray.data

    schema = pa.schema([("id", pa.string()), ("question", pa.string()), ("context", pa.string()),
                        ("answers", pa.struct([("text", pa.list_(pa.string())),
                                               ("answer_start", pa.list_(pa.int64()))]))])
    table = pa.Table.from_pylist(rows, schema=schema)
    # In four blocks: both actors get work.
    step = max(1, len(rows) // 4)
    return ray.data.from_arrow([table.slice(i, step) for i in range(0, len(rows), step)])


RAY_COLUMNS = ("answer", "answer_start", "answer_end", "score", "probability", "no_answer", "null_odds")


def test_ray_answers_equal_ask_many_and_each_actor_keeps_one_client(ray_data, grpc_url):
    import bertqa.ray

    class Traced(bertqa.ray.Answerer):
        """The Answerer, also naming the actor's process and client."""

        def __call__(self, batch):
            out = super().__call__(batch)
            out["worker"] = [f"{os.getpid()}:{id(self.client)}"] * len(batch["id"])
            return out

    # Calls of 64 rows; then one call per batch, two batches at once in each actor.
    for rows, options in ((SAMPLE_ROWS, {}), (MANY_ROWS, {}),
                          (MANY_ROWS, {"rows_per_call": None, "max_concurrency": 2})):
        rows_per_call = options.pop("rows_per_call", 64)
        got = ray_rows(rows).map_batches(
            Traced, fn_constructor_kwargs=dict(url=grpc_url, model="oracle", vocab=VOCAB,
                                               rows_per_call=rows_per_call),
            concurrency=2, batch_size=16, **options).take_all()
        want = expected(grpc_url, rows)
        assert len(got) == len(rows)
        for r in got:
            assert tuple(r[c] for c in RAY_COLUMNS) == want[r["id"]], r["id"]
        workers = {r["worker"] for r in got}
        # At most two actors answered every batch (150 of them for the many rows), each
        # with the one client it built.
        assert 1 <= len(workers) <= 2, workers


def test_ray_evaluate_equals_client_evaluate(ray_data, grpc_url):
    import bertqa.ray

    client = bertqa.Client(grpc_url, "oracle", vocab=VOCAB)
    for rows in (SAMPLE_ROWS, MANY_ROWS[:600]):
        evaluation = bertqa.ray.evaluate(ray_rows(rows), grpc_url, "oracle", vocab=VOCAB)
        assert evaluation.metrics == client.evaluate(rows).metrics
        assert evaluation.predictions == client.evaluate(rows).predictions


def test_ray_job_fails_with_bertqas_message_on_a_dead_server(ray_data):
    import bertqa.ray

    with pytest.raises(Exception) as failed:
        ray_rows(SAMPLE_ROWS[:4]).map_batches(
            bertqa.ray.Answerer,
            fn_constructor_kwargs=dict(url="127.0.0.1:1", model="oracle", vocab=VOCAB, retries=0),
            concurrency=1, batch_size=4).take_all()
    assert dead_url_message() in str(failed.value)


def test_the_engines_modules_say_what_to_install(monkeypatch):
    for module, missing, extra in (("bertqa.spark", "pyspark.sql", "bertqa[spark]"),
                                   ("bertqa.ray", "ray.data", "bertqa[ray]")):
        monkeypatch.delitem(sys.modules, module, raising=False)
        monkeypatch.setitem(sys.modules, missing, None)
        with pytest.raises(ImportError, match=re.escape(f"pip install '{extra}'")):
            importlib.import_module(module)
