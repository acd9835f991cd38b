#!/usr/bin/env bash
# Soak test (a long run must not leak): one `bertqa eval` process sends at least 100,000 requests
# (one feature each) to the `null` model and its resident memory must stay flat: the RSS
# late in the run may exceed the RSS early in the run (after warm-up) by less than 10%.
#
#   scripts/bench/soak.sh [REQUESTS [EVAL_FLAGS...]]   (default: 100000 --n-best-size 1)
#
# The data is a synthetic file (scripts/bench/gen_squad.py) cut into many small windows
# (--max-seq-length 64, --doc-stride 1): ~70 windows per question, so 100,000 requests
# cover only ~1,500 questions and what a run must keep (one prediction per question) is
# small; growth would come from the request path (in-flight window, histogram, journal,
# transport buffers). What a run keeps by design, each question's answer and n-best list
# until the files are written in question order at the end, grows with the questions
# answered (about 2 KiB per question at --n-best-size 20): the default --n-best-size 1
# keeps that out of the measure; pass other eval flags after REQUESTS to include it. RSS of the bertqa process is sampled from /proc every 200 ms;
# "early" is the median of the samples between 10% and 20% of the run, "late" the median
# of the last 10%. Release build; prints the numbers; exit 1 when growth >= 10%.
# Not part of the tests.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
REQUESTS="${1:-100000}"; shift || true
[ $# -gt 0 ] || set -- --n-best-size 1
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="$BERTQA_ROOT/target/release/bertqa"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name soak' EXIT
URL="$(bash scripts/triton.sh start --name soak --grpc-port 18461 --http-port 18460 \
  --metrics-port 18462 -- --model-control-mode=explicit --load-model=null)"
# ~71.5 windows per question at these settings.
QUESTIONS=$(( REQUESTS * 10 / 700 + 50 ))
python3 scripts/bench/gen_squad.py "$WORK/soak.json" --paragraphs $(( QUESTIONS / 5 + 1 )) \
  --questions "$QUESTIONS" >&2
log "bertqa eval: $QUESTIONS questions, one window per request, against null at $URL ($*)"
"$BQ" eval --url "$URL" --model null --data "$WORK/soak.json" --output-dir "$WORK/out" \
  --max-seq-length 64 --doc-stride 1 --max-query-length 16 --batch-size 1 --quiet "$@" \
  > "$WORK/stdout" 2> "$WORK/stderr" &
PID=$!
START=$(date +%s.%N)
: > "$WORK/rss"
while kill -0 "$PID" 2>/dev/null; do
  RSS=$(awk '/^VmRSS:/ {print $2}' "/proc/$PID/status" 2>/dev/null || true)
  [ -n "$RSS" ] && echo "$(date +%s.%N) $RSS" >> "$WORK/rss"
  sleep 0.2
done
wait "$PID" || { tail -5 "$WORK/stderr" >&2; die "bertqa eval failed"; }
python3 - "$WORK/rss" "$WORK/out/metrics.json" "$START" "$REQUESTS" <<'PY'
import json, statistics, sys
path, metrics, start, wanted = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
samples = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
m = json.load(open(metrics))
end = samples[-1][0]
span = end - start
def window(a, b):
    return [kb for t, kb in samples if start + a * span <= t <= start + b * span]
early, late = statistics.median(window(0.1, 0.2)), statistics.median(window(0.9, 1.0))
peak = max(kb for _, kb in samples)
growth = (late - early) / early * 100
print(f"requests           {m['requests']} ({m['features']} features, {m['questions']} questions)")
print(f"wall               {m['wall_s']:.1f} s, {m['throughput']['features_per_s']:.0f} requests/s")
print(f"RSS early (10-20%) {early / 1024:.1f} MiB")
print(f"RSS late (90-100%) {late / 1024:.1f} MiB")
print(f"RSS peak           {peak / 1024:.1f} MiB ({len(samples)} samples)")
deciles = [statistics.median(window(i / 10, (i + 1) / 10) or [0]) / 1024 for i in range(10)]
print("RSS by tenth (MiB)  " + " ".join(f"{d:.1f}" for d in deciles))
print(f"growth             {growth:+.2f}% (limit +10%)")
if m["requests"] < wanted:
    sys.exit(f"only {m['requests']} requests, wanted {wanted}")
sys.exit(0 if growth < 10 else 1)
PY
