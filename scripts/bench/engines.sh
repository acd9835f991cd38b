#!/usr/bin/env bash
# usage: scripts/bench/engines.sh [QUESTIONS]
#
# bertqa.spark and bertqa.ray against one Client.ask_many: the same QUESTIONS (default
# 10,000, of scripts/bench/gen_squad.py's dev-sized file) answered by the `null` model on
# one local Triton, in one run: through Spark `local[2]` (answer_udf), through Ray with
# two actors (Answerer, batches of 1024), both asking 1024 rows a call (`rows_per_call`),
# and through one client's ask_many. Each engine first answers a
# 64-question job (its start-up: JVM and Python workers, actors and clients), timed
# apart and left out of its throughput. Uses the Python tests' venv
# (scripts/test_python.sh keeps it in the cache) with the dev wheel. Prints one JSON line:
# questions/s of each and each engine's ratio to ask_many's (target >= 0.8).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
N="${1:-10000}"
VENV="$BERTQA_CACHE/python-tests-venv"
[ -x "$VENV/bin/python" ] || die "no $VENV: run scripts/test_python.sh once"
bash scripts/install_vocab.sh
WHEEL="$(bash scripts/test_python.sh --wheel-only)"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bertqa-engines.XXXXXX")"
trap 'bash scripts/triton.sh stop --name engines-bench >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$BERTQA_PYTHON" scripts/bench/gen_squad.py "$WORK/dev.json" --vocab vocab/vocab.txt
URL="$(bash scripts/triton.sh start --name engines-bench --grpc-port 18541 --http-port 18540 \
  --metrics-port 18542 -- --model-control-mode=explicit --load-model=null)"
PYSPARK_PYTHON="$VENV/bin/python" "$VENV/bin/python" - "$WORK/dev.json" "$URL" "$N" \
  "$BERTQA_ROOT/vocab/vocab.txt" <<'PY'
import json, sys, time
import pyarrow as pa
import bertqa

data, url, n, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
pairs = [(q["question"], p["context"]) for a in json.load(open(data))["data"]
         for p in a["paragraphs"] for q in p["qas"]][:n]
start = pairs[:64]

def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t

client = bertqa.Client(url, "null", vocab=vocab)
client.ask_many(start)
ask_many_s = timed(lambda: client.ask_many(pairs))

from pyspark.sql import SparkSession
import bertqa.spark
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
udf = bertqa.spark.answer_udf(url, "null", rows_per_call=1024, vocab=vocab)
def spark_rows(rows):
    # The data already in the engine (cached), as a job's would be.
    df = spark.createDataFrame(rows, "question string, context string").repartition(2).cache()
    df.count()
    return df
def spark_job(df):
    df.select(udf("question", "context").alias("a")).write.format("noop").mode("overwrite").save()
few, many = spark_rows(start), spark_rows(pairs)
spark_start_s = timed(lambda: spark_job(few))
spark_s = timed(lambda: spark_job(many))
spark.stop()

import ray, ray.data
import bertqa.ray
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
ray.data.DataContext.get_current().enable_progress_bars = False
def ray_rows(rows):
    # The data already in the engine (materialized, in blocks for both actors).
    table = pa.table({"question": [q for q, _ in rows], "context": [c for _, c in rows]})
    step = max(1, len(rows) // 8)
    return ray.data.from_arrow([table.slice(i, step) for i in range(0, len(rows), step)]).materialize()
def ray_job(ds):
    ds.map_batches(
        bertqa.ray.Answerer,
        fn_constructor_kwargs=dict(url=url, model="null", rows_per_call=1024, vocab=vocab),
        concurrency=2, batch_size=1024).materialize()
few, many = ray_rows(start), ray_rows(pairs)
ray_start_s = timed(lambda: ray_job(few))
ray_s = timed(lambda: ray_job(many))
ray.shutdown()
rate = lambda s: round(len(pairs) / s, 1)
print(json.dumps({
    "questions": len(pairs), "ask_many_per_s": rate(ask_many_s),
    "spark_per_s": rate(spark_s), "ray_per_s": rate(ray_s),
    "spark_ratio": round(ask_many_s / spark_s, 3), "ray_ratio": round(ask_many_s / ray_s, 3),
    "target_ratio": 0.8,
    "start_up_s": {"spark": round(spark_start_s, 2), "ray": round(ray_start_s, 2)},
}))
PY
