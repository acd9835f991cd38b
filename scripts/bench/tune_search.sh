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
#   3. the exhaustive grid once (--exhaustive, 500 ms windows, no re-measurement): its best;
#   4. the grid's best and the first default run's best measured again in alternation,
#      three times each (loaded through the repository API, `bertqa perf` at the
#      concurrency tune reported, 3 s windows): default / grid (target >= 0.95).
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
log "3. the exhaustive grid"
tune_run exhaustive "$BQ" --exhaustive --remeasure 0 --measurement-interval-ms 500

log "4. the grid's best and the default's, measured again in alternation"
"$BERTQA_PYTHON" - "$BENCH_DIR" "$WORK" "$BQ" "$URL" "$MODEL" "$RUNS" <<'PY'
import json, subprocess, sys, urllib.request
bench, work, bq, url, model, runs = sys.argv[1:7]
runs = int(runs)
http = "http://127.0.0.1:18470"

def load(name):
    return json.load(open(f"{bench}/tune-{name}.json"))

def get(path):
    return json.load(urllib.request.urlopen(http + path))

def post(path, body):
    req = urllib.request.Request(http + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=600).read()

original = get(f"/v2/models/{model}/config")

def apply(cfg):
    """Loads the original configuration with a candidate's settings (an override)."""
    c = json.loads(json.dumps(original))
    c["max_batch_size"] = cfg["max_batch_size"]
    for g in c.get("instance_group", []):
        g["count"] = cfg["instance_count"]
    c.pop("dynamic_batching", None)
    d = cfg["dynamic_batching"]
    if d is not None:
        c["dynamic_batching"] = {"max_queue_delay_microseconds": d["max_queue_delay_microseconds"]}
        if d["preferred_batch_size"]:
            c["dynamic_batching"]["preferred_batch_size"] = d["preferred_batch_size"]
    post(f"/v2/repository/models/{model}/load", {"parameters": {"config": json.dumps(c)}})

def perf(concurrency):
    out = subprocess.run([bq, "perf", "--model", model, "--data", "data/sample-squad-v2.json",
                          "--url", url, "--concurrency", str(concurrency), "--batch-size", "1",
                          "--measurement-interval-ms", "3000", "--warmup", "16", "--no-metrics",
                          "--json", "--quiet"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["levels"][0]["throughput"]["features_per_s"]

walls = dict(l.split() for l in open(f"{work}/walls"))
defaults = [load(f"default-{i}") for i in range(1, runs + 1)]
grid = load("exhaustive")
for name, v in [(f"default-{i}", d) for i, d in enumerate(defaults, 1)] + [("exhaustive", grid)]:
    assert v["restored"], f"{name}: the original configuration is not back"

def named(v):
    b = v["best"]
    return b["config"], b["concurrency"], (b["remeasured"] or b["throughput"])["features_per_s"]

pairs = {"grid": named(grid)[:2], "default": named(defaults[0])[:2]}
again = {"grid": [], "default": []}
try:
    for _ in range(3):
        for key in ("default", "grid"):
            cfg, conc = pairs[key]
            apply(cfg)
            again[key].append(perf(conc))
finally:
    post(f"/v2/repository/models/{model}/load", {"parameters": {"config": json.dumps(original)}})
mean = lambda xs: sum(xs) / len(xs)
print("tune-fixed-cost, p99 <= 500 ms, the default space (96 points), concurrency 1:64")
for i, d in enumerate(defaults, 1):
    cfg, conc, fps = named(d)
    print(f"default run {i}: {walls[f'default-{i}']:>4} s, {len(d['candidates']):>2} candidates; "
          f"best {json.dumps(cfg)} at concurrency {conc}: {fps:.1f} features/s re-measured")
if "before" in walls:
    b = load("before")
    print(f"the commit before: {walls['before']:>4} s, {len(b['candidates'])} candidates; "
          f"best {json.dumps(b['best']['config'] if b['best'] else None)}")
elif "before-unfinished" in walls:
    done = open(f"{work}/before-candidates").read().strip() or "?"
    print(f"the commit before: stopped unfinished after {walls['before-unfinished']} s, "
          f"{done} candidates measured by then")
cfg, conc, fps = named(grid)
print(f"exhaustive grid: {walls['exhaustive']:>4} s, {len(grid['candidates'])} candidates; best "
      f"{json.dumps(cfg)} at concurrency {conc}: {fps:.1f} features/s (found once)")
print(f"in alternation, 3 each: default's best {mean(again['default']):.1f} {again['default']}, "
      f"grid's best {mean(again['grid']):.1f} {again['grid']}")
figures = [named(d)[2] for d in defaults]
slowest = max(int(walls[f"default-{i}"]) for i in range(1, runs + 1))
print(json.dumps({
    "default_wall_s": [int(walls[f"default-{i}"]) for i in range(1, runs + 1)],
    "before_wall_s": int(walls.get("before", walls.get("before-unfinished", 0))) or None,
    "before_finished": "before" in walls if "before" in walls or "before-unfinished" in walls else None,
    "target_wall_s": 300, "wall_met": slowest <= 300,
    "default_over_grid": round(mean(again["default"]) / mean(again["grid"]), 3),
    "target_default_over_grid": 0.95,
    "runs_remeasured_features_per_s": [round(f, 1) for f in figures],
    "runs_spread": round(max(figures) / min(figures) - 1, 4), "target_runs_spread": 0.05,
}))
PY
