#!/usr/bin/env bash
# The benchmark suite: bertqa against the Python reference client
# ($BERTQA_REF_CLIENT, a ref_client.py kept outside the project and run here:
# transformers 4.46 + tritonclient, batches of 8 sent one after another) on the same local Triton and the same SQuAD-format files, in one run.
# Release build; a script, never a timed test. Prints every ratio with the numbers behind
# it and whether each target is met.
#
#   scripts/bench/bench.sh [DATA.json ...]
#
# Parts (all on one Triton started here):
#   1. end-to-end against `null` (the client is what is measured), bertqa at --batch-size 8,
#      at its defaults (input tensors through shared memory, the server being local) and
#      at its defaults with --shared-memory none (tensors in each message), and the reference
#      (also, not a target row, --batch-size 8 --concurrency 16): features/s, feature-building time, decode
#      time, client CPU per feature (CPU of the whole process on the file minus the same on
#      a one-question file, divided by features: the median over $BENCH_PAIRS (default 11)
#      runs of each, alternating), peak RSS. Targets: >= 20x features/s, <= 20 us CPU per
#      feature, <= 150 MB peak RSS.
#   2. compute-bound `tiny-bert` on the first $BENCH_SUBSET questions: bertqa's wall time
#      against the server's busy time from ModelStatistics batch_stats (compute input +
#      infer + output per execution, as a delta). Target: within 10%. The logits are saved
#      (--save-logits) and decoded again (--from-logits) to time decoding on real logits;
#      the reference's post_s on the same questions and model is the other side.
#   3. dynamic sequence length (first $BENCH_ONNX_SUBSET questions): on
#      `bert-onnx-padmasked` (padding logits masked, so the padding probe keeps dynamic
#      length) padded to each batch's longest feature vs --fixed-seq-len, answer files
#      byte-identical; on `bert-onnx` (random weights, padding ranks high: the probe pads
#      to 384) --dynamic-seq-len vs --fixed-seq-len, and how many answers differ.
#      Target: >= 1.5x.
#   4. decoding + scoring alone on a SQuAD-dev-sized synthetic input with random logits
#      against transformers' compute_predictions_logits (scripts/bench/bench_decode.sh).
#      Target: well under 0.5 s, >= 100x. Skip with BENCH_DECODE=0.
#
# Default data: the SQuAD-dev-sized file made by scripts/bench/gen_squad.py, plus
# $BERTQA_EXTRA_DATA when set (e.g. a public SQuAD file with very long contexts, read at
# run time, not shipped with bertqa). Method and figures: docs/performance.md.
# The reference client takes minutes per file: its results are cached in
# $BENCH_DIR/ref-*.json keyed by the file's and the client's checksums (BENCH_FRESH_REF=1
# runs it again). Without the reference client only bertqa is measured.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
BENCH_DIR="${BENCH_DIR:-$BERTQA_ROOT/target/bench}"
SUBSET="${BENCH_SUBSET:-400}"
ONNX_SUBSET="${BENCH_ONNX_SUBSET:-600}"
mkdir -p "$BENCH_DIR"
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}/release/bertqa"
ref_client
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name bench-suite >/dev/null 2>&1 || true' EXIT
RESULTS="$WORK/results.jsonl"; : > "$RESULTS"

if [ $# -eq 0 ]; then
  [ -f "$BENCH_DIR/dev-sized.json" ] || python3 scripts/bench/gen_squad.py "$BENCH_DIR/dev-sized.json" >&2
  set -- "$BENCH_DIR/dev-sized.json"
  ECON="${BERTQA_EXTRA_DATA:-}"
  if [ -n "$ECON" ]; then
    [ -f "$ECON" ] || die "BERTQA_EXTRA_DATA=$ECON: no such file"
    set -- "$@" "$ECON"
  fi
fi
GRPC=18421 HTTP=18420
URL="$(bash scripts/triton.sh start --name bench-suite --grpc-port $GRPC --http-port $HTTP --metrics-port 18422)"
STATS="http://127.0.0.1:$HTTP/v2/models"

# subset IN N OUT: the first N questions of IN as a SQuAD file.
subset() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
src, n, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
d = json.load(open(src)); left = n; data = []
for art in d["data"]:
    paras = []
    for p in art["paragraphs"]:
        if left <= 0: break
        q = dict(p); q["qas"] = p["qas"][:left]; left -= len(q["qas"]); paras.append(q)
    if paras: data.append({**art, "paragraphs": paras})
    if left <= 0: break
json.dump({**d, "data": data}, open(dst, "w"))
PY
}

# measure KIND NAME DATA OUTDIR cmd... : runs cmd under scripts/bench/rusage.py (what
# /usr/bin/time reports, to the microsecond rather than the hundredth of a second) and
# appends one JSON line (wall, CPU, peak RSS, the run's own figures) to $RESULTS.
measure() {
  local kind="$1" name="$2" data="$3" out="$4"; shift 4
  python3 scripts/bench/rusage.py "$WORK/time" "$@" > "$WORK/stdout" 2> "$WORK/stderr" \
    || { tail -5 "$WORK/stderr" >&2; die "$name failed on $data"; }
  grep -i 'warning' "$WORK/stderr" >&2 || true
  python3 - "$kind" "$name" "$data" "$WORK/time" "$WORK/stdout" "$out" >> "$RESULTS" <<'PY'
import json, sys
kind, name, data, tfile, sfile, out = sys.argv[1:]
wall, user, sys_, rss, nvcsw, nivcsw = open(tfile).read().split()
row = {"kind": kind, "name": name, "data": data, "process_wall_s": float(wall),
       "cpu_s": float(user) + float(sys_), "user_s": float(user), "sys_s": float(sys_),
       "rss_mb": int(rss) / 1024, "nvcsw": int(nvcsw), "nivcsw": int(nivcsw)}
if name.startswith("reference"):
    m = json.loads([l for l in open(sfile) if l.strip().startswith("{")][-1])
    row.update(features=m["features"], feature_s=m["feature_s"], infer_s=m["infer_s"],
               post_s=m["post_s"], wall_s=float(wall))
else:
    m = json.load(open(f"{out}/metrics.json"))
    p = m["phases_s"]
    row.update(features=m["features"], requests=m["requests"], feature_s=p["features"], infer_s=p["inference"],
               post_s=p["decode"], wall_s=float(wall), pipeline_wall_s=m["wall_s"],
               client=m.get("client", {}), padding=m.get("padding"))
print(json.dumps(row))
PY
}

# reference KIND NAME DATA MODEL: the reference client, cached by checksums.
reference() {
  local kind="$1" name="$2" data="$3" model="$4" key cache
  [ -n "$REF" ] || return 0
  key="$(cat "$data" "$REF" | sha256sum | cut -c1-16)-$model"
  cache="$BENCH_DIR/ref-$key.json"
  if [ -f "$cache" ] && [ "${BENCH_FRESH_REF:-0}" != 1 ]; then
    log "$name on $data: cached result $cache"
  else
    local v2=""
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if str(d.get('version','')).startswith(('v2','2')) else 1)" "$data" && v2="--v2"
    log "$name on $data against $model (the reference takes minutes)"
    : > "$WORK/one.jsonl"
    RESULTS="$WORK/one.jsonl" measure "$kind" "$name" "$data" "$WORK/ref" \
      "$REFPY" "$REF" "$data" "$model" "$WORK/ref" --url "$URL" --batch 8 --vocab vocab/vocab.txt $v2
    cp "$WORK/one.jsonl" "$cache"
  fi
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['kind']=sys.argv[2]; r['name']=sys.argv[3]; r['data']=sys.argv[4]; print(json.dumps(r))" \
    "$cache" "$kind" "$name" "$data" >> "$RESULTS"
}

# bertqa_eval KIND NAME LABEL FILE OUTDIR args... (LABEL: the data file the row belongs to):
# one run (the server's busy time is a delta over one run).
bertqa_eval() {
  local kind="$1" name="$2" label="$3" file="$4" out="$5"; shift 5
  log "$name on $file"
  measure "$kind" "$name" "$label" "$out" \
    "$BQ" eval --url "$URL" --data "$file" --output-dir "$out" --quiet "$@"
}

# The CPU per feature of a setting: a one-question run and a run on DATA, alternating,
# BENCH_PAIRS times (default 11), so that both sides of each difference meet the same
# moment of these shared cores (run minutes apart, they did not, and the difference
# drifted by several µs per feature). The settings take turns, one pair each per round,
# so that none of them gets a noisier stretch of the machine to itself. Rows: the
# one-question run of median CPU (kind base) and the full run of median CPU (kind e2e),
# which also carries every pair's difference and their median (net_cpu_s), and medians
# of the user and system time and of the context switches.

# pair_run KEY NAME BASE_NAME DATA ONE OUT args...: one more pair of setting KEY.
pair_run() {
  local key="$1" name="$2" base="$3" data="$4" one="$5" out="$6"; shift 6
  RESULTS="$WORK/ones-$key.jsonl" measure base "$base" "$data" "$out-one" \
    "$BQ" eval --url "$URL" --data "$one" --output-dir "$out-one" --quiet "$@"
  RESULTS="$WORK/fulls-$key.jsonl" measure e2e "$name" "$data" "$out" \
    "$BQ" eval --url "$URL" --data "$data" --output-dir "$out" --quiet "$@"
}

# pair_rows KEY: the rows of setting KEY's pairs, appended to $RESULTS.
pair_rows() {
  python3 - "$WORK/ones-$1.jsonl" "$WORK/fulls-$1.jsonl" >> "$RESULTS" <<'PY'
import json, statistics, sys
ones, fulls = ([json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[1:])
nets = [f["cpu_s"] - o["cpu_s"] for o, f in zip(ones, fulls)]
net = lambda key: statistics.median(f[key] - o[key] for o, f in zip(ones, fulls))
for rows in (ones, fulls):
    row = sorted(rows, key=lambda r: r["cpu_s"])[len(rows) // 2]
    row["cpu_s_runs"] = [r["cpu_s"] for r in rows]
    if row["kind"] == "e2e":
        row["net_cpu_s_pairs"] = nets
        row["net_cpu_s"] = statistics.median(nets)
        # Where it goes: user and system time, and the context switches (sleeps for the
        # server's answers, preemptions by the server's threads on the shared cores).
        for key in ("user_s", "sys_s", "nvcsw", "nivcsw"):
            row["net_" + key] = net(key)
    print(json.dumps(row))
PY
}

# 1. End-to-end against null.
for DATA in "$@"; do
  subset "$DATA" 1 "$WORK/one.json"
  rm -f "$WORK"/ones-*.jsonl "$WORK"/fulls-*.jsonl
  pairs="${BENCH_PAIRS:-11}"
  # One run first, unmeasured: the server's first requests and the file's first read.
  "$BQ" eval --url "$URL" --model null --data "$DATA" --output-dir "$WORK/warm" --quiet >/dev/null
  log "bertqa on $DATA against null: $pairs rounds, each setting one pair per round (its run alternating with a one-question run)"
  for i in $(seq "$pairs"); do
    pair_run b8 "bertqa --batch-size 8" "one-question b8" "$DATA" "$WORK/one.json" "$WORK/b8" --model null --batch-size 8
    # Not a target row: batch 8 with two of null's 64-row batches in flight (the
    # README's advice at small batch sizes), refilled eight requests at a time.
    pair_run b8c16 "bertqa --batch-size 8 --concurrency 16" "one-question b8 c16" "$DATA" "$WORK/one.json" "$WORK/b8c16" --model null --batch-size 8 --concurrency 16
    pair_run bd "bertqa (defaults)" "one-question defaults" "$DATA" "$WORK/one.json" "$WORK/bd" --model null
    # The defaults send tensors through shared memory to a local server; this is the
    # same run with every tensor in its message (a server on another machine).
    pair_run bn "bertqa --shared-memory none" "one-question no-shm" "$DATA" "$WORK/one.json" "$WORK/bn" --model null --shared-memory none
  done
  for key in b8 b8c16 bd bn; do pair_rows "$key"; done
  reference e2e "reference" "$DATA" null
done

# 2. Compute-bound tiny-bert on a subset; decode time on its logits.
FIRST="$1"
subset "$FIRST" "$SUBSET" "$WORK/subset.json"
stats() { curl -sf "$STATS/$1/stats"; }
stats tiny-bert > "$WORK/stats0.json"
bertqa_eval tiny "bertqa tiny-bert (defaults)" "$WORK/subset.json" "$WORK/subset.json" "$WORK/tiny" --model tiny-bert --save-logits
stats tiny-bert > "$WORK/stats1.json"
python3 - "$WORK/stats0.json" "$WORK/stats1.json" >> "$RESULTS" <<'PY'
import json, sys
def busy(path):
    s = json.load(open(path))["model_stats"][0]
    ns = sum(b[k]["ns"] for b in s.get("batch_stats", []) for k in ("compute_input", "compute_infer", "compute_output"))
    return ns, s.get("execution_count", 0)
(a, ea), (b, eb) = busy(sys.argv[1]), busy(sys.argv[2])
print(json.dumps({"kind": "server", "name": "tiny-bert server busy", "busy_s": (b - a) / 1e9, "executions": eb - ea}))
PY
log "decoding the saved tiny-bert logits again (--from-logits)"
measure decode "bertqa decode (--from-logits)" "$WORK/subset.json" "$WORK/tiny-re" "$BQ" eval --data "$WORK/subset.json" \
  --output-dir "$WORK/tiny-re" --quiet --from-logits "$WORK/tiny/logits.bin"
cmp -s "$WORK/tiny/predictions.json" "$WORK/tiny-re/predictions.json" || die "re-decoded predictions differ"
reference decode "reference tiny-bert" "$WORK/subset.json" tiny-bert

# 3. Dynamic sequence length on bert-onnx.
subset "$FIRST" "$ONNX_SUBSET" "$WORK/onnx.json"
bertqa_eval onnx "bert-onnx-padmasked dynamic length" "$WORK/onnx.json" "$WORK/onnx.json" "$WORK/dyn" --model bert-onnx-padmasked
bertqa_eval onnx "bert-onnx-padmasked --fixed-seq-len" "$WORK/onnx.json" "$WORK/onnx.json" "$WORK/fix" --model bert-onnx-padmasked --fixed-seq-len
for f in predictions.json nbest_predictions.json; do
  cmp -s "$WORK/dyn/$f" "$WORK/fix/$f" || die "bert-onnx-padmasked: dynamic and fixed $f differ"
done
bertqa_eval onnx "bert-onnx --dynamic-seq-len" "$WORK/onnx.json" "$WORK/onnx.json" "$WORK/dyn-raw" --model bert-onnx --dynamic-seq-len
bertqa_eval onnx "bert-onnx --fixed-seq-len" "$WORK/onnx.json" "$WORK/onnx.json" "$WORK/fix-raw" --model bert-onnx --fixed-seq-len
python3 - "$WORK/dyn-raw/predictions.json" "$WORK/fix-raw/predictions.json" > "$WORK/onnx-differ.txt" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
print(sum(a[k] != b.get(k) for k in a), len(a))
PY

# 4. Decoding + scoring alone against transformers.
if [ "${BENCH_DECODE:-1}" != 0 ] && [ -n "$REF" ]; then
  bash scripts/bench/bench_decode.sh "$BENCH_DIR/decode" > "$WORK/decode.txt"
fi

cp "$RESULTS" "$BENCH_DIR/last-results.jsonl"
[ -f "$WORK/decode.txt" ] && cp "$WORK/decode.txt" "$BENCH_DIR/last-decode.txt"
python3 - "$RESULTS" "$SUBSET" "$ONNX_SUBSET" "$WORK/decode.txt" "$WORK/onnx-differ.txt" <<'PY'
import json, os, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
subset, onnx_subset, decode_txt = sys.argv[2], sys.argv[3], sys.argv[4]
verdicts = []
def verdict(name, ok, detail):
    verdicts.append(f"  [{'met' if ok else 'NOT met'}] {name}: {detail}")
def get(kind, name, data=None):
    return next((r for r in rows if r["kind"] == kind and r["name"] == name and (data is None or r["data"] == data)), None)

for data in dict.fromkeys(r["data"] for r in rows if r["kind"] == "e2e"):
    ref = get("e2e", "reference", data)
    print(f"\n== end-to-end against `null` on {data} ==")
    print(f"{'client':<38} {'features':>8} {'wall s':>8} {'feat/s':>9} {'build s':>8} {'infer s':>8} {'decode s':>8} {'CPU s':>7} {'µs CPU/feat':>11} {'RSS MB':>7}")
    for name, base in (("bertqa --batch-size 8", "one-question b8"), ("bertqa --batch-size 8 --concurrency 16", "one-question b8 c16"), ("bertqa (defaults)", "one-question defaults"), ("bertqa --shared-memory none", "one-question no-shm"), ("reference", None)):
        r = get("e2e", name, data)
        if not r: continue
        b = get("base", base, data) if base else None
        net = r.get("net_cpu_s", r["cpu_s"] - (b["cpu_s"] if b else 0.0))
        r["us_per_feature"] = 1e6 * net / r["features"]
        if "net_cpu_s_pairs" in r:
            r["us_per_feature_pairs"] = sorted(1e6 * n / r["features"] for n in r["net_cpu_s_pairs"])
        r["fps"] = r["features"] / r["wall_s"]
        print(f"{name:<38} {r['features']:>8} {r['wall_s']:>8.2f} {r['fps']:>9.1f} {r['feature_s']:>8.3f} {r['infer_s']:>8.3f} {r['post_s']:>8.3f} {r['cpu_s']:>7.2f} {r['us_per_feature']:>11.1f} {r['rss_mb']:>7.1f}")
    print("  (wall s: the whole process, reading and writing included; µs CPU/feat: user+sys of the process minus a one-question run of the same client, per feature, the median over runs alternating with one-question runs; the reference's is not net of start-up)")
    for name in ("bertqa --batch-size 8", "bertqa --batch-size 8 --concurrency 16", "bertqa (defaults)", "bertqa --shared-memory none"):
        r = get("e2e", name, data)
        if r and "us_per_feature_pairs" in r:
            print(f"  {name}: µs CPU/feat of each pair, sorted: {', '.join(f'{x:.1f}' for x in r['us_per_feature_pairs'])}")
    for name in ("bertqa --batch-size 8", "bertqa --batch-size 8 --concurrency 16", "bertqa (defaults)", "bertqa --shared-memory none"):
        r = get("e2e", name, data)
        if r and "net_user_s" in r and r.get("requests"):
            b = get("base", {"bertqa --batch-size 8": "one-question b8", "bertqa --batch-size 8 --concurrency 16": "one-question b8 c16", "bertqa (defaults)": "one-question defaults", "bertqa --shared-memory none": "one-question no-shm"}[name], data)
            requests = r["requests"] - (b or {}).get("requests", 0)
            print(f"  {name}: per feature {1e6 * r['net_user_s'] / r['features']:.1f} µs user + {1e6 * r['net_sys_s'] / r['features']:.1f} µs system (medians of the pairs); "
                  f"{requests} requests, context switches per request {r['net_nvcsw'] / requests:.2f} voluntary (waits for answers), {r['net_nivcsw'] / requests:.2f} involuntary (preempted)")
    for name in ("bertqa --batch-size 8", "bertqa (defaults)", "bertqa --shared-memory none"):
        r = get("e2e", name, data)
        if not r:
            continue
        c = r.get("client") or {}
        if c:
            print(f"  {name}: client limited {c.get('limited_s', 0):.3f} s of {r['pipeline_wall_s']:.3f} s (sender starved {c.get('starved_s', 0):.3f} s, decoder lag {c.get('decoder_lag_s', 0):.3f} s)")
        if ref:
            print(f"  {name} vs reference: features/s {r['fps']:.1f} / {ref['fps']:.1f} = {r['fps'] / ref['fps']:.1f}x; "
                  f"feature building {ref['feature_s']:.2f} / {r['feature_s']:.3f} s = {ref['feature_s'] / max(r['feature_s'], 1e-9):.0f}x; "
                  f"decode (null's zeros) {ref['post_s']:.2f} / {r['post_s']:.3f} s = {ref['post_s'] / max(r['post_s'], 1e-9):.0f}x; "
                  f"CPU per feature {ref['us_per_feature']:.0f} / {r['us_per_feature']:.1f} µs = {ref['us_per_feature'] / max(r['us_per_feature'], 1e-9):.0f}x; "
                  f"peak RSS {ref['rss_mb']:.0f} / {r['rss_mb']:.0f} MB = {ref['rss_mb'] / r['rss_mb']:.1f}x")
            verdict(f"{os.path.basename(data)} {name}: end-to-end >= 20x the reference", r["fps"] / ref["fps"] >= 20, f"{r['fps'] / ref['fps']:.1f}x")
        verdict(f"{os.path.basename(data)} {name}: client CPU <= 20 µs per feature", r["us_per_feature"] <= 20, f"{r['us_per_feature']:.1f} µs")
        verdict(f"{os.path.basename(data)} {name}: peak RSS <= 150 MB", r["rss_mb"] <= 150, f"{r['rss_mb']:.1f} MB")

tiny, server = get("tiny", "bertqa tiny-bert (defaults)"), get("server", "tiny-bert server busy")
if tiny and server:
    print(f"\n== compute-bound `tiny-bert`, first {subset} questions ({tiny['features']} features) ==")
    ratio = tiny["pipeline_wall_s"] / server["busy_s"]
    print(f"  bertqa wall {tiny['pipeline_wall_s']:.2f} s (whole process {tiny['process_wall_s']:.2f} s) vs server busy {server['busy_s']:.2f} s "
          f"over {server['executions']} executions (batch_stats compute input+infer+output): {100 * (ratio - 1):+.1f}%")
    verdict("tiny-bert: wall within 10% of the server's busy time", ratio <= 1.10, f"{100 * (ratio - 1):+.1f}%")
dec, refdec = get("decode", "bertqa decode (--from-logits)"), get("decode", "reference tiny-bert")
if dec:
    print(f"\n== decoding on tiny-bert logits (saved with --save-logits, {dec['features']} features) ==")
    line = f"  bertqa decode {dec['post_s']:.4f} s ({1e6 * dec['post_s'] / dec['features']:.1f} µs/feature)"
    if refdec:
        line += f" vs reference post_s {refdec['post_s']:.3f} s on the same questions and model: {refdec['post_s'] / max(dec['post_s'], 1e-9):.0f}x"
    print(line)
dyn, fix = get("onnx", "bert-onnx-padmasked dynamic length"), get("onnx", "bert-onnx-padmasked --fixed-seq-len")
if dyn and fix:
    a, b = dyn["features"] / dyn["pipeline_wall_s"], fix["features"] / fix["pipeline_wall_s"]
    mode = (dyn.get("padding") or {}).get("mode")
    print(f"\n== dynamic sequence length, first {onnx_subset} questions ({dyn['features']} features) ==")
    print(f"  bert-onnx-padmasked, defaults (padding mode {mode}): {a:.1f} features/s; --fixed-seq-len: {b:.1f} features/s; "
          f"speedup {a / b:.2f}x; predictions and n-best byte-identical")
    verdict("dynamic length >= 1.5x (bert-onnx-padmasked, answers identical)", mode == "dynamic" and a / b >= 1.5, f"{a / b:.2f}x, mode {mode}")
raw, rawfix = get("onnx", "bert-onnx --dynamic-seq-len"), get("onnx", "bert-onnx --fixed-seq-len")
if raw and rawfix:
    a, b = raw["features"] / raw["pipeline_wall_s"], rawfix["features"] / rawfix["pipeline_wall_s"]
    differ = open(sys.argv[5]).read().split() if len(sys.argv) > 5 and os.path.exists(sys.argv[5]) else ["?", "?"]
    print(f"  bert-onnx --dynamic-seq-len: {a:.1f} features/s; --fixed-seq-len: {b:.1f} features/s; speedup {a / b:.2f}x; "
          f"{differ[0]} of {differ[1]} predictions differ (padding ranks in this random model's top 20, spec 6.2; "
          f"by default the padding probe pads it to 384)")
if os.path.exists(decode_txt) and os.path.getsize(decode_txt):
    print("\n== decoding + scoring alone, SQuAD-dev-sized synthetic input, random logits (scripts/bench/bench_decode.sh) ==")
    print("".join("  " + l for l in open(decode_txt)))
print("\n== targets ==")
print("\n".join(verdicts))
print(f"load average at the end: {open('/proc/loadavg').read().split()[0]} (2 shared cores: wall times are noisy, CPU times less so)")
PY
