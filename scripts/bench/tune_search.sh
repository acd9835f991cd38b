#!/usr/bin/env bash
# `bertqa tune`'s default search against the exhaustive grid, on the same server in one
# run. Release build; a script, never a timed test.
#
#   scripts/bench/tune_search.sh
#
# One local Triton in explicit model-control mode on models/tune (ports 18471-18473):
#   1. tune-fixed-cost (every execution sleeps 20 ms whatever its batch; found at max
#      batch 8, one instance, no dynamic batching), the default search space
#      (--max-batch-sizes 8,16,32,64 --queue-delays-us 0,100,500,2000 --instances 1,2,4
#      --preferred-batch-sizes auto: 96 points), a budget of p99 <= 100 ms, the binary
#      search of concurrency 1:64: the default search, then --exhaustive. Prints each
#      one's candidates and best (features/s within the budget) and the two ratios the
#      target is about: candidates default / exhaustive (target <= 0.5) and best default /
#      best exhaustive (target >= 0.95).
#   2. For information: the default search on tune-tiny-bert from its shipped
#      configuration, over a smaller space (tiny-bert is a real numpy BERT: seconds per
#      batch on two cores), with a generous budget.
# The reports (JSON) are kept in $BENCH_DIR/tune-*.json. Measurement windows:
# $TUNE_WINDOW requests (default 48) per window, stability 20%, at most 6 windows.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
BENCH_DIR="${BENCH_DIR:-$BERTQA_ROOT/target/bench}"
WINDOW="${TUNE_WINDOW:-48}"
mkdir -p "$BENCH_DIR"
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}/release/bertqa"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name tune-bench >/dev/null 2>&1 || true' EXIT
URL="$(bash scripts/triton.sh start --name tune-bench --repo "$BERTQA_ROOT/models/tune" \
  --grpc-port 18471 --http-port 18470 --metrics-port 18472 -- --model-control-mode=explicit \
  --load-model=tune-fixed-cost --load-model=tune-tiny-bert)"
COMMON=(--data data/sample-squad-v2.json --url "$URL" --control-url 127.0.0.1:18470
  --metrics-url 127.0.0.1:18472 --measurement-request-count "$WINDOW"
  --stability-percentage 20 --max-trials 6 --json --quiet)

# tune_run NAME MODEL ARGS...: one tune run, its report in $BENCH_DIR/tune-NAME.json.
tune_run() {
  local name="$1" model="$2"; shift 2
  local start end
  start="$(date +%s)"
  "$BQ" tune --model "$model" "${COMMON[@]}" --output-dir "$WORK/$name" "$@" \
    > "$BENCH_DIR/tune-$name.json" || die "tune $name failed (exit $?)"
  end="$(date +%s)"
  echo "$name $((end - start))" >> "$WORK/walls"
}

log "1. tune-fixed-cost: the default search"
tune_run default tune-fixed-cost --latency-threshold 100
log "1. tune-fixed-cost: the exhaustive grid"
tune_run exhaustive tune-fixed-cost --latency-threshold 100 --exhaustive
log "2. tune-tiny-bert: the default search (for information)"
tune_run tiny-bert tune-tiny-bert --latency-threshold 5000 --max-batch-sizes 4,8,16 \
  --queue-delays-us 100,2000 --instances 1,2 --preferred-batch-sizes none \
  --concurrency-range 1:8 --warmup 2

python3 - "$BENCH_DIR" "$WORK/walls" <<'PY'
import json, sys
bench, walls = sys.argv[1], dict(l.split() for l in open(sys.argv[2]))
def load(name):
    return json.load(open(f"{bench}/tune-{name}.json"))
def fps(c):
    return c["throughput"]["features_per_s"] if c and c["within_budget"] else 0.0
def line(name, v):
    best = v["best"]
    cfg = best["config"] if best else None
    print(f"{name:<11} {len(v['candidates']):>4} candidates, {walls[name]:>5} s: "
          f"found {fps(v['baseline']):8.1f} features/s, best {fps(best):8.1f} "
          f"(#{v['best_index']}: {json.dumps(cfg)})")
d, e = load("default"), load("exhaustive")
print("tune-fixed-cost, p99 <= 100 ms, concurrency 1:64, 96-point space:")
line("default", d)
line("exhaustive", e)
print(f"candidates default/exhaustive: {len(d['candidates']) / len(e['candidates']):.3f} (target <= 0.5)")
print(f"best default/exhaustive:       {fps(d['best']) / fps(e['best']):.3f} (target >= 0.95)")
print(f"best default/found:            {fps(d['best']) / fps(d['baseline']):.2f}x")
t = load("tiny-bert")
print("tune-tiny-bert (for information), p99 <= 5000 ms, concurrency 1:8, 24-point space:")
line("tiny-bert", t)
for name, v in (("default", d), ("exhaustive", e), ("tiny-bert", t)):
    assert v["restored"], f"{name}: the original configuration is not back"
print("every run put the original configuration back (read back and equal)")
PY
