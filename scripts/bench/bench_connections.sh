#!/usr/bin/env bash
# Endpoint-pool benchmark: bertqa eval throughput with --connections 1 and 4, against one
# local Triton and against three, with the client's CPU use (user + sys of the bertqa
# process, /usr/bin/time) beside each, on the `null` model so that the client and the
# transport are what is measured. Release build; not part of the tests.
#
#   scripts/bench/bench_connections.sh [DATA.json]
#
# Default data: a SQuAD-dev-sized file made by scripts/bench/gen_squad.py. Settings:
# BERTQA_BENCH_BATCH (default 8) features per request, BERTQA_BENCH_CONCURRENCY
# (default 16) requests in flight. All servers run on this machine, so with few cores
# three servers share the CPU of one: the table shows the client's side of the story.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
BATCH="${BERTQA_BENCH_BATCH:-8}"
CONC="${BERTQA_BENCH_CONCURRENCY:-16}"
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="$BERTQA_ROOT/target/release/bertqa"
WORK="$(mktemp -d)"
cleanup() {
  for i in 1 2 3; do bash scripts/triton.sh stop --name "bench-conn-$i" || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
if [ $# -eq 0 ]; then
  python3 scripts/bench/gen_squad.py "$WORK/dev-sized.json" >&2
  set -- "$WORK/dev-sized.json"
fi
DATA="$1"
URLS=()
for i in 1 2 3; do
  base=$((18500 + 10 * i))
  URLS+=("$(bash scripts/triton.sh start --name "bench-conn-$i" --grpc-port $((base + 1)) \
    --http-port "$base" --metrics-port $((base + 2)) -- \
    --model-control-mode=explicit --load-model=null)")
done
ONE="${URLS[0]}"
THREE="$(IFS=,; echo "${URLS[*]}")"

: > "$WORK/results.jsonl"
run() { # label urls connections
  local label="$1" urls="$2" conns="$3" out="$WORK/out"
  log "$label"
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$BQ" eval --url "$urls" --model null \
    --data "$DATA" --output-dir "$out" --batch-size "$BATCH" --concurrency "$CONC" \
    --connections "$conns" --quiet > /dev/null 2> "$WORK/stderr" \
    || { tail -5 "$WORK/stderr" >&2; die "$label failed"; }
  python3 - "$label" "$WORK/time" "$out/metrics.json" >> "$WORK/results.jsonl" <<'PY'
import json, sys
label, tfile, mfile = sys.argv[1:]
wall, user, sys_, rss = open(tfile).read().split()[-4:]
m = json.load(open(mfile))
print(json.dumps({"label": label, "features": m["features"], "wall_s": m["wall_s"],
                  "process_s": float(wall), "cpu_s": float(user) + float(sys_),
                  "p50_ms": m["latency_ms"]["p50"], "p99_ms": m["latency_ms"]["p99"],
                  "endpoints": [(e["url"], e["features_per_s"]) for e in m["endpoints"]]}))
PY
}
# Warm the servers once so the first measured run is not the slowest.
"$BQ" eval --url "$THREE" --model null --data "$DATA" --output-dir "$WORK/warm" --limit 2000 --quiet > /dev/null
run "1 server,  --connections 1" "$ONE" 1
run "1 server,  --connections 4" "$ONE" 4
run "3 servers, --connections 1" "$THREE" 1
run "3 servers, --connections 4" "$THREE" 4

python3 - "$DATA" "$BATCH" "$CONC" "$WORK/results.jsonl" <<'PY'
import json, sys
data, batch, conc, path = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
print(f"\n{data}: {rows[0]['features']} features, model null, --batch-size {batch}, --concurrency {conc}")
print(f"{'run':<28} {'features/s':>11} {'wall s':>8} {'client CPU s':>13} {'µs CPU/feat':>12} {'p50 ms':>8} {'p99 ms':>8}")
for r in rows:
    print(f"{r['label']:<28} {r['features'] / r['wall_s']:>11.1f} {r['wall_s']:>8.2f} {r['cpu_s']:>13.2f} "
          f"{1e6 * r['cpu_s'] / r['features']:>12.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}")
for r in rows:
    if len(r["endpoints"]) > 1:
        print(f"  {r['label']}: " + ", ".join(f"{u} {f:.1f} features/s" for u, f in r["endpoints"]))
PY
