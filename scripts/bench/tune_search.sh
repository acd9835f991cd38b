#!/usr/bin/env bash
# `bertqa tune` as a user runs it, against the exhaustive grid, on one local Triton.
# Release build; a script, never a timed test.
#
#   scripts/bench/tune_search.sh [RUNS]
#
# One Triton in explicit model-control mode on models/tune (ports 18471-18473), the model
# tune-fixed-cost (every execution sleeps 20 ms whatever its batch; found at max batch 8,
# one instance, no dynamic batching), the bundled sample's windows, p99 <= 500 ms:
#   1. the default search exactly as a user runs it (the default space: max batch
#      8,16,32,64, queue delays 0,100,500,2000 us, instances 1,2,4, preferred sizes auto;
#      the default windows, concurrency 1:64, re-measurement of the best 3), RUNS times
#      (default 3): the wall time of each (target <= 300 s), the configuration each names
#      and its re-measured throughput (target: the RUNS within 5% of each other);
#   2. $BERTQA_TUNE_BEFORE, when set (a bertqa binary of the commit before), the same
#      default search once, stopped after $BERTQA_TUNE_BEFORE_LIMIT s (default 1800; tune
#      puts the original back on the signal): today's figure beside the new one;
#   3. the exhaustive grid once (--exhaustive, 500 ms windows, no re-measurement): its best
#      ($BERTQA_TUNE_GRID: a report of it kept from an earlier run instead);
#   4. the configurations the default runs named and the grid's best, measured again side
#      by side in alternation, three times each (scripts/bench/tune_alternation.py:
#      loaded through the repository API, `bertqa perf` at the concurrency tune
#      reported, 3 s windows): each default / grid (target >= 0.95); the runs' named
#      configurations' re-measured throughputs (each run's own) within 5% of each other,
#      and their spread side by side (for information).
# The reports (JSON) are kept in $BENCH_DIR/tune-*.json.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
RUNS="${1:-3}"
BENCH_DIR="${BENCH_DIR:-$BERTQA_ROOT/target/bench}"
mkdir -p "$BENCH_DIR"
bash scripts/install_vocab.sh
cargo build --release --quiet --bin bertqa
BQ="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}/release/bertqa"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name tune-bench >/dev/null 2>&1 || true' EXIT
URL="$(bash scripts/triton.sh start --name tune-bench --repo "$BERTQA_ROOT/models/tune" \
  --grpc-port 18471 --http-port 18470 --metrics-port 18472 -- --model-control-mode=explicit \
  --load-model=tune-fixed-cost)"
MODEL=tune-fixed-cost
USER_ARGS=(--model "$MODEL" --data data/sample-squad-v2.json --url "$URL"
  --control-url 127.0.0.1:18470 --latency-threshold 500 --json --quiet)

# tune_run NAME BINARY ARGS...: one tune run, its report in $BENCH_DIR/tune-NAME.json.
tune_run() {
  local name="$1" bin="$2" start end; shift 2
  start="$(date +%s)"
  "$bin" tune "${USER_ARGS[@]}" --output-dir "$WORK/$name" "$@" \
    > "$BENCH_DIR/tune-$name.json" || die "tune $name failed (exit $?)"
  end="$(date +%s)"
  echo "$name $((end - start))" >> "$WORK/walls"
  log "$name: $((end - start)) s"
}

for i in $(seq "$RUNS"); do
  log "1. the default search, run $i of $RUNS"
  tune_run "default-$i" "$BQ"
done
if [ -n "${BERTQA_TUNE_BEFORE:-}" ]; then
  LIMIT="${BERTQA_TUNE_BEFORE_LIMIT:-1800}"
  log "2. the default search of $BERTQA_TUNE_BEFORE (at most $LIMIT s)"
  start="$(date +%s)"
  if timeout "$LIMIT" "$BERTQA_TUNE_BEFORE" tune "${USER_ARGS[@]}" --output-dir "$WORK/before" \
    > "$BENCH_DIR/tune-before.json" 2> "$WORK/before.err"; then
    echo "before $(( $(date +%s) - start ))" >> "$WORK/walls"
  else
    echo "before-unfinished $(( $(date +%s) - start ))" >> "$WORK/walls"
    grep -c '^candidate [0-9]*: [0-9.]* features/s' "$WORK/before.err" > "$WORK/before-candidates" || true
  fi
fi
if [ -n "${BERTQA_TUNE_GRID:-}" ]; then
  log "3. the exhaustive grid: kept from an earlier run ($BERTQA_TUNE_GRID)"
  [ "$BERTQA_TUNE_GRID" -ef "$BENCH_DIR/tune-exhaustive.json" ] || cp "$BERTQA_TUNE_GRID" "$BENCH_DIR/tune-exhaustive.json"
  echo "exhaustive kept" >> "$WORK/walls"
else
  log "3. the exhaustive grid"
  tune_run exhaustive "$BQ" --exhaustive --remeasure 0 --measurement-interval-ms 500
fi

log "4. the configurations the runs named, measured again side by side in alternation"
REPORTS=()
for i in $(seq "$RUNS"); do REPORTS+=("$BENCH_DIR/tune-default-$i.json"); done
"$BERTQA_PYTHON" scripts/bench/tune_alternation.py "$BQ" "$URL" http://127.0.0.1:18470 "$MODEL" \
  data/sample-squad-v2.json 3 "${REPORTS[@]}" "$BENCH_DIR/tune-exhaustive.json" > "$WORK/alternation.json"
"$BERTQA_PYTHON" - "$BENCH_DIR" "$WORK" "$RUNS" <<'PY'
import json, sys
bench, work, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
load = lambda name: json.load(open(f"{bench}/tune-{name}.json"))
walls = dict(l.split() for l in open(f"{work}/walls"))
again = json.load(open(f"{work}/alternation.json"))
defaults = [load(f"default-{i}") for i in range(1, runs + 1)]
grid = load("exhaustive")
for name, v in [(f"default-{i}", d) for i, d in enumerate(defaults, 1)] + [("exhaustive", grid)]:
    assert v["restored"], f"{name}: the original configuration is not back"
print("tune-fixed-cost, p99 <= 500 ms, the default space (96 points), concurrency 1:64")
for i, (d, a) in enumerate(zip(defaults, again), 1):
    b = d["best"]
    print(f"default run {i}: {walls[f'default-{i}']:>4} s, {len(d['candidates']):>2} candidates; "
          f"best {json.dumps(b['config'])} at concurrency {b['concurrency']}: "
          f"{b['remeasured']['features_per_s']:.1f} features/s re-measured by the run, "
          f"{a['mean']:.1f} {a['rounds']} side by side")
if "before" in walls:
    b = load("before")
    print(f"the commit before: {walls['before']:>4} s, {len(b['candidates'])} candidates")
elif "before-unfinished" in walls:
    done = open(f"{work}/before-candidates").read().strip() or "?"
    print(f"the commit before: stopped unfinished after {walls['before-unfinished']} s, "
          f"{done} candidates measured by then")
g = again[-1]
print(f"exhaustive grid: {walls['exhaustive']:>4} s, {len(grid['candidates'])} candidates; best "
      f"{json.dumps(grid['best']['config'])}: {g['mean']:.1f} {g['rounds']} side by side")
means = [a["mean"] for a in again[:-1]]
remeasured = [d["best"]["remeasured"]["features_per_s"] for d in defaults]
print(json.dumps({
    "default_wall_s": [int(walls[f"default-{i}"]) for i in range(1, runs + 1)],
    "before_wall_s": int(walls.get("before", walls.get("before-unfinished", 0))) or None,
    "target_wall_s": 300,
    "wall_met": max(int(walls[f"default-{i}"]) for i in range(1, runs + 1)) <= 300,
    "default_over_grid": [round(m / g["mean"], 3) for m in means], "target_default_over_grid": 0.95,
    "runs_remeasured_spread": round(max(remeasured) / min(remeasured) - 1, 4),
    "target_runs_remeasured_spread": 0.05,
    "runs_side_by_side_spread": round(max(means) / min(means) - 1, 4),
}))
PY
