#!/usr/bin/env bash
# usage: scripts/bench/engines.sh [QUESTIONS] [ROUNDS] [ROWS_PER_CALL | batch]
#
# bertqa.spark and bertqa.ray against one Client.ask_many: the same QUESTIONS (default
# 10,000, of scripts/bench/gen_squad.py's dev-sized file) answered by the `null` model on
# one local Triton, in one run: through Spark `local[2]` (answer_udf), through Ray with
# two actors (Answerer, Ray's batches of 1024, two at once per actor: max_concurrency=2),
# both asking ROWS_PER_CALL rows a call (default `batch`: one call per engine batch, as
# docs/scale.md advises for throughput; answer_udf's and Answerer's own default is 64),
# and through one client's ask_many. One engine runs at a time, in a process of its own
# (as on a node of either), its start-up (JVM, Python workers, actors, clients) paid
# before timing; then ROUNDS (default 5) alternating rounds time ask_many, the engine's
# 64-question job (what any job costs it: scheduling, serialization, actors) and its
# QUESTIONS job. An engine's throughput leaves its 64-question job out: (QUESTIONS - 64)
# / (median QUESTIONS job - median 64-question job), against ask_many's in the same
# rounds (target >= 0.8). Printed too: the whole job's figure, and for information the
# QUESTIONS job against the same job answering nothing (a UDF or callable returning
# constants: over_nothing_ratio, what bertqa adds inside the engine). Uses the Python
# tests' venv (scripts/test_python.sh keeps it in the cache) with a release wheel for
# this machine (maturin --release; $BERTQA_WHEEL names another), as users install.
# Prints one JSON line.
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
cat > "$WORK/engine.py" <<'PY'
# engine.py DATA URL QUESTIONS VOCAB ROUNDS ROWS_PER_CALL ENGINE: one engine's figures.
import json, statistics, sys, time
import numpy as np
import pyarrow as pa
import bertqa

data, url, n, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rounds = int(sys.argv[5])
rows_per_call = None if sys.argv[6] == "batch" else int(sys.argv[6])
name = sys.argv[7]
pairs = [(q["question"], p["context"]) for a in json.load(open(data))["data"]
         for p in a["paragraphs"] for q in p["qas"]][:n]
few = pairs[:64]

def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t

client = bertqa.Client(url, "null", vocab=vocab)
client.ask_many(few)

def spark_engine():
    """Spark local[2] with the rows cached in it (as a job's data would be): the job, the
    64-question and the whole data, and how to stop it."""
    from pyspark.sql import SparkSession
    import bertqa.spark
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    udf = bertqa.spark.answer_udf(url, "null", rows_per_call=rows_per_call, vocab=vocab)
    def rows(rs):
        df = spark.createDataFrame(rs, "question string, context string").repartition(2).cache()
        df.count()
        return df
    import pandas as pd
    from pyspark.sql import functions as F

    @F.pandas_udf(bertqa.spark.ANSWER)
    def nothing(q: pd.Series, c: pd.Series) -> pd.DataFrame:
        n = len(q)
        return pd.DataFrame({"text": ["x"] * n, "start": [0] * n, "end": [1] * n,
                             "score": [0.0] * n, "probability": [0.0] * n,
                             "no_answer": [False] * n, "null_odds": [0.0] * n})
    def job(df, f=udf):
        df.select(f("question", "context").alias("a")).write.format("noop").mode("overwrite").save()
    return job, lambda df: job(df, nothing), rows(few), rows(pairs), spark.stop

def ray_engine():
    """Ray's local cluster with the rows materialized in it, in blocks for both actors."""
    import ray, ray.data
    import bertqa.ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    def rows(rs):
        table = pa.table({"question": [q for q, _ in rs], "context": [c for _, c in rs]})
        step = max(1, len(rs) // 8)
        return ray.data.from_arrow([table.slice(i, step) for i in range(0, len(rs), step)]).materialize()
    class Nothing:
        """Answerer's columns, constant, without a client."""
        def __init__(self, **_):
            pass
        def __call__(self, batch):
            n = len(batch["question"])
            return dict(batch, **{c: np.array([0] * n, dtype=object) for c in bertqa.ray.COLUMNS})
    def job(ds, cls=bertqa.ray.Answerer):
        ds.map_batches(
            cls,
            fn_constructor_kwargs=dict(url=url, model="null", rows_per_call=rows_per_call, vocab=vocab),
            concurrency=2, batch_size=1024, max_concurrency=2).materialize()
    return job, lambda ds: job(ds, Nothing), rows(few), rows(pairs), ray.shutdown

job, nothing, small, big, stop = {"spark": spark_engine, "ray": ray_engine}[name]()
first_job = timed(lambda: job(small))
nothing(small)
times = {"ask_many": [], "64": [], "all": [], "nothing": []}
for _ in range(rounds):
    # A client of its own each round, built before the clock starts: like a job's
    # clients, it has not tokenized these words before (Ray's actors are new each job).
    fresh = bertqa.Client(url, "null", vocab=vocab)
    times["ask_many"].append(timed(lambda: fresh.ask_many(pairs)))
    times["64"].append(timed(lambda: job(small)))
    times["all"].append(timed(lambda: job(big)))
    times["nothing"].append(timed(lambda: nothing(big)))
stop()
med = {k: statistics.median(v) for k, v in times.items()}
ask_many = len(pairs) / med["ask_many"]
rate = (len(pairs) - len(few)) / (med["all"] - med["64"])
print(json.dumps({"ask_many_per_s": round(ask_many, 1), "per_s": round(rate, 1),
                  "ratio": round(rate / ask_many, 3),
                  "whole_job_ratio": round(len(pairs) / med["all"] / ask_many, 3),
                  "job_64_s": round(med["64"], 3), "first_job_s": round(first_job, 2),
                  # Information: what answering adds to the same job that does nothing.
                  "over_nothing_ratio": round(len(pairs) / (med["all"] - med["nothing"]) / ask_many, 3),
                  "nothing_job_s": round(med["nothing"], 3)}))
PY
# One engine per process, one after the other: what one leaves running (Spark's JVM,
# Ray's daemons) would slow the next.
for engine in spark ray; do
  PYSPARK_PYTHON="$VENV/bin/python" "$VENV/bin/python" "$WORK/engine.py" "$WORK/dev.json" \
    "$URL" "$N" "$BERTQA_ROOT/vocab/vocab.txt" "${2:-5}" "${3:-batch}" "$engine" \
    2>"$WORK/$engine.log" | tail -1 > "$WORK/$engine.json" \
    || { tail -20 "$WORK/$engine.log" >&2; die "the $engine job failed"; }
done
"$BERTQA_PYTHON" - "$WORK" "$N" "${2:-5}" "${3:-batch}" <<'PY'
import json, sys
work, n, rounds, rows_per_call = sys.argv[1:]
out = {"questions": int(n), "rounds": int(rounds), "rows_per_call": rows_per_call}
for engine in ("spark", "ray"):
    out[engine] = json.load(open(f"{work}/{engine}.json"))
out["target_ratio"] = 0.8
print(json.dumps(out))
PY
