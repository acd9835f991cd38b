#!/usr/bin/env bash
# usage: scripts/bench/engines.sh [QUESTIONS] [ROUNDS] [ROWS_PER_CALL]
#
# bertqa.spark and bertqa.ray against one Client.ask_many: the same QUESTIONS (default
# 10,000, of scripts/bench/gen_squad.py's dev-sized file) answered by the `null` model on
# one local Triton, in one run: through Spark `local[2]` (answer_udf), through Ray with
# two actors (Answerer, batches of 1024), both asking ROWS_PER_CALL rows a call (default
# 64, answer_udf's and Answerer's default), and through one client's ask_many. The
# engines' start-up (JVM, Python workers, actors, clients) is paid once before timing;
# then ROUNDS (default 5) alternating rounds time each engine's 64-question job (what
# any job costs it: scheduling, serialization, actors) and its QUESTIONS job, and
# ask_many. An engine's throughput leaves its 64-question job out: (QUESTIONS - 64) /
# (median QUESTIONS job - median 64-question job); its whole-job figure is printed too. Uses the Python tests' venv
# (scripts/test_python.sh keeps it in the cache) with a release wheel for this machine
# (maturin --release; $BERTQA_WHEEL names another), as users install. Prints one JSON line:
# questions/s of each and each engine's ratio to ask_many's (target >= 0.8).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
N="${1:-10000}"
VENV="$BERTQA_CACHE/python-tests-venv"
[ -x "$VENV/bin/python" ] || die "no $VENV: run scripts/test_python.sh once"
bash scripts/install_vocab.sh
WHEEL="${BERTQA_WHEEL:-}"
if [ -z "$WHEEL" ]; then
  ensure_venv "$BERTQA_CACHE/maturin-venv" maturin==1.15.0
  rm -rf target/wheels/bench
  "$BERTQA_CACHE/maturin-venv/bin/maturin" build --release --quiet -o target/wheels/bench >/dev/null
  WHEEL="$(ls target/wheels/bench/bertqa-*.whl)"
fi
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bertqa-engines.XXXXXX")"
trap 'bash scripts/triton.sh stop --name engines-bench >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$BERTQA_PYTHON" scripts/bench/gen_squad.py "$WORK/dev.json" --vocab vocab/vocab.txt
URL="$(bash scripts/triton.sh start --name engines-bench --grpc-port 18541 --http-port 18540 \
  --metrics-port 18542 -- --model-control-mode=explicit --load-model=null)"
PYSPARK_PYTHON="$VENV/bin/python" "$VENV/bin/python" - "$WORK/dev.json" "$URL" "$N" \
  "$BERTQA_ROOT/vocab/vocab.txt" "${2:-5}" "${3:-64}" <<'PY'
import json, statistics, sys, time
import pyarrow as pa
import bertqa

data, url, n, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rounds, rows_per_call = int(sys.argv[5]), int(sys.argv[6])
pairs = [(q["question"], p["context"]) for a in json.load(open(data))["data"]
         for p in a["paragraphs"] for q in p["qas"]][:n]
few = pairs[:64]

def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t

client = bertqa.Client(url, "null", vocab=vocab)
client.ask_many(few)

from pyspark.sql import SparkSession
import bertqa.spark
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
udf = bertqa.spark.answer_udf(url, "null", rows_per_call=rows_per_call, vocab=vocab)
def spark_rows(rows):
    # The data already in the engine (cached), as a job's would be.
    df = spark.createDataFrame(rows, "question string, context string").repartition(2).cache()
    df.count()
    return df
def spark_job(df):
    df.select(udf("question", "context").alias("a")).write.format("noop").mode("overwrite").save()

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
        fn_constructor_kwargs=dict(url=url, model="null", rows_per_call=rows_per_call, vocab=vocab),
        concurrency=2, batch_size=1024).materialize()

jobs = {
    "spark": (spark_job, spark_rows(few), spark_rows(pairs)),
    "ray": (ray_job, ray_rows(few), ray_rows(pairs)),
}
start_up = {name: timed(lambda: job(small)) for name, (job, small, _) in jobs.items()}
times = {k: [] for k in ("ask_many", "spark_64", "spark", "ray_64", "ray")}
for _ in range(rounds):
    times["ask_many"].append(timed(lambda: client.ask_many(pairs)))
    for name, (job, small, big) in jobs.items():
        times[name + "_64"].append(timed(lambda: job(small)))
        times[name].append(timed(lambda: job(big)))
spark.stop()
ray.shutdown()
med = {k: statistics.median(v) for k, v in times.items()}
ask_many = len(pairs) / med["ask_many"]
out = {"questions": len(pairs), "rounds": rounds, "rows_per_call": rows_per_call,
       "ask_many_per_s": round(ask_many, 1)}
for name in jobs:
    rate = (len(pairs) - len(few)) / (med[name] - med[name + "_64"])
    out[name + "_per_s"] = round(rate, 1)
    out[name + "_ratio"] = round(rate / ask_many, 3)
    out[name + "_whole_job_ratio"] = round(len(pairs) / med[name] / ask_many, 3)
    out[name + "_64_job_s"] = round(med[name + "_64"], 3)
out["target_ratio"] = 0.8
out["first_job_s"] = {k: round(v, 2) for k, v in start_up.items()}
print(json.dumps(out))
PY
