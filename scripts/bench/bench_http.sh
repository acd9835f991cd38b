#!/usr/bin/env bash
# The HTTP transport's benchmark: bertqa over --protocol http against bertqa
# over gRPC, and against the Python reference client over tritonclient.http, on one local
# Triton that loads only `null` (the client is what is measured), in one run. Release
# build; a script, never a timed test.
#
#   scripts/bench/bench_http.sh [DATA.json]
#
# DATA: by default the SQuAD-dev-sized file made by scripts/bench/gen_squad.py
# (target/bench/dev-sized.json, as scripts/bench/bench.sh makes it).
#   1. Client CPU per feature at the defaults, HTTP vs gRPC: CPU (user + sys) of the whole
#      `eval` on DATA minus the same on its first question, per feature; $BENCH_PAIRS
#      rounds (default 7), each running one pair of each protocol, the order of the two
#      alternating from round to round, so both meet the same moments of the shared
#      cores. Medians; the ratio HTTP / gRPC. Target: <= 2x. The defaults send tensors
#      through shared memory to a local server; the same pairs with --shared-memory none
#      (every tensor in its message, as to a server on another machine) follow, not a
#      target row.
#   2. End to end over HTTP: features/s of bertqa (defaults; and --batch-size 8, the
#      reference's batch) against the reference client ($BERTQA_REF_CLIENT, a
#      ref_client.py taking --protocol http: transformers + tritonclient.http, batches of
#      8 sent one after another) on the same server and file; the reference's result is
#      cached in $BENCH_DIR/ref-http-*.json keyed by the file's and the client's checksums
#      (BENCH_FRESH_REF=1 runs it again). Target: >= 20x. Without BERTQA_REF_CLIENT this
#      part is skipped with a note.
# Prints every figure behind each ratio, and the load average before and after (the
# figures need a quiet machine).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
BENCH_DIR="${BENCH_DIR:-$BERTQA_ROOT/target/bench}"
PAIRS="${BENCH_PAIRS:-7}"
mkdir -p "$BENCH_DIR"
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}/release/bertqa"
ref_client
DATA="${1:-$BENCH_DIR/dev-sized.json}"
if [ ! -f "$DATA" ]; then
  [ "$DATA" = "$BENCH_DIR/dev-sized.json" ] || die "$DATA: no such file"
  python3 scripts/bench/gen_squad.py "$DATA" >&2
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name bench-http >/dev/null 2>&1 || true' EXIT
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"
GRPC=18451 HTTP=18450
GRPC_URL="$(bash scripts/triton.sh start --name bench-http --grpc-port $GRPC --http-port $HTTP \
  --metrics-port 18452 -- --model-control-mode=explicit --load-model=null)"
HTTP_URL="127.0.0.1:$HTTP"
python3 - "$DATA" "$WORK/one.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
art = d["data"][0]; para = art["paragraphs"][0]
json.dump({**d, "data": [{**art, "paragraphs": [{**para, "qas": para["qas"][:1]}]}]}, open(sys.argv[2], "w"))
PY

# measure ROWS LABEL FILE OUT cmd...: runs cmd under scripts/bench/rusage.py; appends one JSON
# line (label, file, process wall, CPU, peak RSS, features from OUT/metrics.json or the
# reference's last stdout line) to ROWS.
measure() {
  local rows="$1" label="$2" file="$3" out="$4"; shift 4
  python3 scripts/bench/rusage.py "$WORK/time" "$@" > "$WORK/stdout" 2> "$WORK/stderr" \
    || { tail -5 "$WORK/stderr" >&2; die "$label failed on $file"; }
  python3 - "$label" "$file" "$WORK/time" "$WORK/stdout" "$out" >> "$rows" <<'PY'
import json, os, sys
label, file, tfile, sfile, out = sys.argv[1:]
wall, user, sys_, rss, _, _ = open(tfile).read().split()
row = {"label": label, "file": file, "wall_s": float(wall), "cpu_s": float(user) + float(sys_),
       "rss_mb": int(rss) / 1024}
if os.path.exists(f"{out}/metrics.json"):
    m = json.load(open(f"{out}/metrics.json"))
    row.update(features=m["features"], protocol=(m.get("model") or {}).get("protocol"))
else:
    m = json.loads([l for l in open(sfile) if l.strip().startswith("{")][-1])
    row.update(features=m["features"])
print(json.dumps(row))
PY
}

# pair PROTOCOL URL [KEY args...]: one run on the first question, then one on DATA, at
# the defaults (KEY: the setting's name in the rows, with its extra eval args).
pair() {
  local p="$1" url="$2" key="${3:-$1}"; shift 2; if [ $# -gt 0 ]; then shift; fi
  measure "$WORK/$key-one.jsonl" "$key one question" "$WORK/one.json" "$WORK/$key-one" \
    "$BQ" eval --protocol "$p" --url "$url" --model null --data "$WORK/one.json" --output-dir "$WORK/$key-one" --quiet "$@"
  measure "$WORK/$key-full.jsonl" "$key" "$DATA" "$WORK/$key-full" \
    "$BQ" eval --protocol "$p" --url "$url" --model null --data "$DATA" --output-dir "$WORK/$key-full" --quiet "$@"
}

# Unmeasured first runs: the server's first requests and the file's first read.
for p in grpc http; do
  url="$GRPC_URL"; [ "$p" = http ] && url="$HTTP_URL"
  "$BQ" eval --protocol "$p" --url "$url" --model null --data "$DATA" --output-dir "$WORK/warm-$p" --quiet >/dev/null
done
cmp -s "$WORK/warm-grpc/predictions.json" "$WORK/warm-http/predictions.json" \
  || die "predictions over HTTP differ from gRPC's"
log "CPU per feature at the defaults on $DATA: $PAIRS rounds of a gRPC pair and an HTTP pair"
for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then pair grpc "$GRPC_URL"; pair http "$HTTP_URL"
  else pair http "$HTTP_URL"; pair grpc "$GRPC_URL"; fi
done
log "the same with --shared-memory none: $PAIRS rounds"
for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then
    pair grpc "$GRPC_URL" grpc-noshm --shared-memory none; pair http "$HTTP_URL" http-noshm --shared-memory none
  else
    pair http "$HTTP_URL" http-noshm --shared-memory none; pair grpc "$GRPC_URL" grpc-noshm --shared-memory none
  fi
done
log "end to end over HTTP: bertqa --batch-size 8"
measure "$WORK/b8.jsonl" "http --batch-size 8" "$DATA" "$WORK/b8" \
  "$BQ" eval --protocol http --url "$HTTP_URL" --model null --data "$DATA" --output-dir "$WORK/b8" --quiet --batch-size 8
: > "$WORK/ref.jsonl"
if [ -n "$REF" ]; then
  key="$(cat "$DATA" "$REF" | sha256sum | cut -c1-16)"
  cache="$BENCH_DIR/ref-http-$key.json"
  if [ -f "$cache" ] && [ "${BENCH_FRESH_REF:-0}" != 1 ]; then
    log "reference over HTTP: cached result $cache"
  else
    v2=""
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if str(d.get('version','')).startswith(('v2','2')) else 1)" "$DATA" && v2="--v2"
    log "reference (tritonclient.http, batch 8) on $DATA (it takes minutes)"
    : > "$WORK/one-ref.jsonl"
    measure "$WORK/one-ref.jsonl" "reference http" "$DATA" "$WORK/ref" \
      "$REFPY" "$REF" "$DATA" null "$WORK/ref" --url "$HTTP_URL" --batch 8 --protocol http --vocab vocab/vocab.txt $v2
    cp "$WORK/one-ref.jsonl" "$cache"
  fi
  cp "$cache" "$WORK/ref.jsonl"
fi
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$LOAD_BEFORE" "$LOAD_AFTER" "$(nproc)" <<'PY'
import json, statistics, sys
work, before, after, cpus = sys.argv[1:]
rows = lambda name: [json.loads(l) for l in open(f"{work}/{name}.jsonl") if l.strip()]
us = {}
def cpu(title, grpc, http, target):
  print(title)
  for p in (grpc, http):
    ones, fulls = rows(f"{p}-one"), rows(f"{p}-full")
    features = fulls[0]["features"]
    per_pair = sorted(1e6 * (f["cpu_s"] - o["cpu_s"]) / features for o, f in zip(ones, fulls))
    us[p] = statistics.median(per_pair)
    fps = statistics.median(f["features"] / f["wall_s"] for f in fulls)
    rss = statistics.median(f["rss_mb"] for f in fulls)
    print(f"  {p:<10} {features} features: {us[p]:.1f} µs CPU/feature (median of {len(per_pair)} pairs: "
          f"{', '.join(f'{x:.1f}' for x in per_pair)}); {fps:.0f} features/s (median process wall); peak RSS {rss:.0f} MB")
  ratio = us[http] / us[grpc]
  verdict = f"   [{'met' if ratio <= 2 else 'NOT met'}: target <= 2x]" if target else ""
  print(f"  HTTP / gRPC: {us[http]:.1f} / {us[grpc]:.1f} µs = {ratio:.2f}x{verdict}")
cpu("== client CPU per feature at the defaults, against `null` ==", "grpc", "http", True)
cpu("\n== the same with --shared-memory none (tensors in each message; not a target) ==", "grpc-noshm", "http-noshm", False)
print(f"\n== end to end over HTTP ==")
b8 = rows("b8")[0]
defaults = statistics.median(f["features"] / f["wall_s"] for f in rows("http-full"))
b8_fps = b8["features"] / b8["wall_s"]
print(f"  bertqa (defaults): {defaults:.0f} features/s; bertqa --batch-size 8: {b8_fps:.0f} features/s ({b8['wall_s']:.2f} s)")
ref = rows("ref")
if ref:
    r = ref[0]
    r_fps = r["features"] / r["wall_s"]
    print(f"  reference (tritonclient.http, batch 8): {r['features']} features in {r['wall_s']:.1f} s = {r_fps:.1f} features/s, "
          f"{r['cpu_s']:.1f} s CPU, peak RSS {r['rss_mb']:.0f} MB")
    for name, fps in (("defaults", defaults), ("--batch-size 8", b8_fps)):
        x = fps / r_fps
        print(f"  bertqa {name} / reference: {fps:.0f} / {r_fps:.1f} = {x:.1f}x   [{'met' if x >= 20 else 'NOT met'}: target >= 20x]")
else:
    print("  reference not measured (set BERTQA_REF_CLIENT to a ref_client.py taking --protocol http)")
print(f"\nload average before {before}, after {after} ({cpus} CPUs; the figures need a quiet machine)")
PY
