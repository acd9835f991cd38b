#!/usr/bin/env bash
# The speed of run_qa's rules (`--postprocess run-qa`: windows cut by any fast tokenizer,
# run_qa's post-processing), side by side in one run. Release build; a script, never a
# timed test.
#
#   scripts/bench/run_qa_speed.sh [DATA.json]
#
# DATA: by default the SQuAD-dev-sized file made by scripts/bench/gen_squad.py
# (target/bench/dev-sized.json, as scripts/bench/bench.sh makes it).
#   1. Client CPU per feature of `eval` at the defaults with a byte-level BPE tokenizer
#      (`--tokenizer tests/fixtures/tokenizers/roberta`: run_qa's rules) against the
#      WordPiece path (the default `--vocab vocab/vocab.txt`: run_squad's rules), both
#      against `null` on one local Triton that loads only `null` (the client is what is
#      measured; `null` takes both runs' windows). CPU (user + sys, getrusage) of the
#      whole `eval` on DATA minus the same on its first question, per feature;
#      $BENCH_PAIRS rounds (default 5), each running one pair of each side, the order of
#      the two alternating from round to round. Medians; the ratio BPE / WordPiece.
#      Target: <= 2x. The two make different windows of the same questions (the small
#      test BPE splits words finer), so CPU per question is printed too, for information.
#   2. Building the features of DATA: the whole `bertqa features --tokenizer T --data DATA
#      > /dev/null` process against the whole process of run_qa's preparation with the
#      same tokenizer.json in transformers' fast tokenizer
#      (`scripts/golden/golden_run_qa.py DATA - --tokenizer T --features-only`: batches of
#      1000 questions, one tokenizer call each, as run_qa's `Dataset.map` hands them over;
#      its python from scripts/testbed/setup_runqa_venv.sh; interpreter start and imports
#      included), wall time on the same cores (the tokenizers library encodes a batch on
#      all of them; bertqa on one). For T = the roberta folder (byte-level BPE) and the
#      distilbert folder (WordPiece) with `--postprocess run-qa`; $BENCH_RUNS rounds
#      (default 3), the order alternating. Medians; the ratio Python / bertqa. Target:
#      >= 5x. The feature counts of both (bertqa: its JSON lines) must agree. For
#      information, `bertqa features` at the defaults (run_squad's rules) on DATA.
# BENCH_PARTS (default "1 2") picks the parts. Prints every figure behind each ratio, the
# CPU the rest of the machine used during the runs (/proc/stat less the measured process:
# a busy neighbour slows the tokenizers library, which uses both cores, more than bertqa)
# and the load average before and after (the figures need a quiet machine).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
BENCH_DIR="${BENCH_DIR:-$BERTQA_ROOT/target/bench}"
PAIRS="${BENCH_PAIRS:-5}"
RUNS="${BENCH_RUNS:-3}"
PARTS="${BENCH_PARTS:-1 2}"
BPE=tests/fixtures/tokenizers/roberta
WP=tests/fixtures/tokenizers/distilbert
mkdir -p "$BENCH_DIR"
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}/release/bertqa"
PY="$(bash scripts/testbed/setup_runqa_venv.sh)"
DATA="${1:-$BENCH_DIR/dev-sized.json}"
if [ ! -f "$DATA" ]; then
  [ "$DATA" = "$BENCH_DIR/dev-sized.json" ] || die "$DATA: no such file"
  python3 scripts/bench/gen_squad.py "$DATA" >&2
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name run-qa-speed >/dev/null 2>&1 || true' EXIT
LOAD_BEFORE="$(cut -d' ' -f1-3 /proc/loadavg)"

# busy: the CPU seconds all processes of the machine have used since boot (/proc/stat).
busy() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{print ($2 + $3 + $4 + $7 + $8 + $9) / hz}' /proc/stat; }
# measure ROWS LABEL cmd...: runs cmd under scripts/bench/rusage.py (its stdout kept in
# $WORK/stdout, or sent to $STDOUT when set); appends one JSON line (label, process wall,
# CPU, peak RSS, and the CPU the rest of the machine used meanwhile) to ROWS.
measure() {
  local rows="$1" label="$2" b0; shift 2
  b0="$(busy)"
  python3 scripts/bench/rusage.py "$WORK/time" "$@" > "${STDOUT:-$WORK/stdout}" 2> "$WORK/stderr" \
    || { tail -5 "$WORK/stderr" >&2; die "$label failed"; }
  python3 - "$label" "$WORK/time" "$b0" "$(busy)" >> "$rows" <<'PY'
import json, sys
label, tfile, b0, b1 = sys.argv[1:]
wall, user, sys_, rss, _, _ = open(tfile).read().split()
cpu = float(user) + float(sys_)
print(json.dumps({"label": label, "wall_s": float(wall), "cpu_s": cpu, "rss_mb": int(rss) / 1024,
                  "others_s": max(0.0, float(b1) - float(b0) - cpu)}))
PY
}

# Part 1: eval at the defaults, WordPiece against byte-level BPE, against `null`.
# eval_side SIDE FILE: one eval of SIDE (wordpiece: the defaults, --vocab vocab/vocab.txt
# and run_squad's rules; bpe: --tokenizer $BPE) on FILE (one: the first question; full).
eval_side() {
  local side="$1" file="$2" data="$DATA" out="$WORK/$1-$2" args=()
  [ "$file" = one ] && data="$WORK/one.json"
  [ "$side" = bpe ] && args=(--tokenizer "$BPE")
  rm -rf "$out"
  measure "$WORK/$side-$file.jsonl" "eval $side on $file" "$BQ" eval --url "$URL" --model null \
    --data "$data" --output-dir "$out" --quiet "${args[@]}"
  cp "$out/metrics.json" "$WORK/$side-$file.metrics.json"
}
pair() { eval_side "$1" one; eval_side "$1" full; }
if [[ " $PARTS " == *" 1 "* ]]; then
  URL="$(bash scripts/triton.sh start --name run-qa-speed --grpc-port 18471 --http-port 18470 \
    --metrics-port 18472 -- --model-control-mode=explicit --load-model=null)"
  python3 - "$DATA" "$WORK/one.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
art = d["data"][0]; para = art["paragraphs"][0]
json.dump({**d, "data": [{**art, "paragraphs": [{**para, "qas": para["qas"][:1]}]}]}, open(sys.argv[2], "w"))
PY
  # Unmeasured first runs: the server's first requests and the file's first read.
  eval_side wordpiece full; eval_side bpe full
  rm -f "$WORK"/*.jsonl
  log "client CPU per feature on $DATA: $PAIRS rounds of a WordPiece pair and a BPE pair"
  for i in $(seq "$PAIRS"); do
    if [ $((i % 2)) = 1 ]; then pair wordpiece; pair bpe; else pair bpe; pair wordpiece; fi
  done
  bash scripts/triton.sh stop --name run-qa-speed >/dev/null 2>&1 || true
fi

# Part 2: feature building, bertqa against run_qa's preparation in Python.
# features NAME BERTQA_ARGS...: one `bertqa features` (stdout to /dev/null).
features() {
  local name="$1"; shift
  STDOUT=/dev/null measure "$WORK/feat-$name-bertqa.jsonl" "bertqa features ($name)" \
    "$BQ" features --data "$DATA" "$@"
}
# prepare NAME TOKENIZER: one run of run_qa's preparation; keeps its printed line.
prepare() {
  measure "$WORK/feat-$1-python.jsonl" "run_qa's preparation ($1)" \
    "$PY" scripts/golden/golden_run_qa.py "$DATA" - --tokenizer "$2" --features-only
  tail -1 "$WORK/stdout" >> "$WORK/feat-$1-python.out"
}
if [[ " $PARTS " == *" 2 "* ]]; then
  # Unmeasured: bertqa's feature counts (its JSON lines), which also warm the file's read.
  "$BQ" features --data "$DATA" --tokenizer "$BPE" 2>/dev/null | wc -l > "$WORK/count-roberta"
  "$BQ" features --data "$DATA" --tokenizer "$WP" --postprocess run-qa 2>/dev/null | wc -l > "$WORK/count-distilbert"
  "$BQ" features --data "$DATA" 2>/dev/null | wc -l > "$WORK/count-defaults"
  log "feature building on $DATA: $RUNS rounds of bertqa and run_qa's preparation, per tokenizer"
  for i in $(seq "$RUNS"); do
    if [ $((i % 2)) = 1 ]; then
      features roberta --tokenizer "$BPE"; prepare roberta "$BPE"
      features distilbert --tokenizer "$WP" --postprocess run-qa; prepare distilbert "$WP"
    else
      prepare distilbert "$WP"; features distilbert --tokenizer "$WP" --postprocess run-qa
      prepare roberta "$BPE"; features roberta --tokenizer "$BPE"
    fi
    features defaults
  done
fi
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK" "$DATA" "$LOAD_BEFORE" "$LOAD_AFTER" "$(nproc)" <<'PY'
import json, os, statistics, sys
work, data, before, after, cpus = sys.argv[1:]
rows = lambda name: [json.loads(l) for l in open(f"{work}/{name}.jsonl") if l.strip()]
med = statistics.median
walls = lambda rs: ", ".join(f"{r['wall_s']:.3f}" for r in rs)
others = lambda rs: med(r["others_s"] for r in rs)
exists = lambda name: os.path.exists(f"{work}/{name}.jsonl")
if exists("bpe-full"):
    print(f"== 1. client CPU per feature of `eval` at the defaults, against `null`, on {data} ==")
    us = {}
    for side, what in (("wordpiece", "WordPiece, --vocab vocab/vocab.txt (run_squad's rules)"),
                       ("bpe", "byte-level BPE, --tokenizer tests/fixtures/tokenizers/roberta (run_qa's rules)")):
        m = json.load(open(f"{work}/{side}-full.metrics.json"))
        features, questions = m["features"], m["questions"]
        ones, fulls = rows(f"{side}-one"), rows(f"{side}-full")
        per_pair = sorted(1e6 * (f["cpu_s"] - o["cpu_s"]) / features for o, f in zip(ones, fulls))
        us[side] = med(per_pair)
        per_q = med(1e6 * (f["cpu_s"] - o["cpu_s"]) / questions for o, f in zip(ones, fulls))
        print(f"  {what}: {features} features of {questions} questions ({m['postprocess']})")
        print(f"    {us[side]:.1f} µs CPU/feature (median of {len(per_pair)} pairs: "
              f"{', '.join(f'{x:.1f}' for x in per_pair)}); {per_q:.1f} µs CPU/question; whole run "
              f"{med(f['cpu_s'] for f in fulls):.3f} s CPU, {med(f['wall_s'] for f in fulls):.3f} s wall "
              f"(the rest of the machine, the server included, {others(fulls):.2f} s CPU meanwhile), one question "
              f"{med(o['cpu_s'] for o in ones):.3f} s CPU; peak RSS {med(f['rss_mb'] for f in fulls):.0f} MB")
    ratio = us["bpe"] / us["wordpiece"]
    print(f"  BPE / WordPiece: {us['bpe']:.1f} / {us['wordpiece']:.1f} µs = {ratio:.2f}x   "
          f"[{'met' if ratio <= 2 else 'NOT met'}: target <= 2x]")

if exists("feat-defaults-bertqa"):
    print(f"\n== 2. building the features of {data}: whole process, wall time, {cpus} CPUs ==")
    counts = {n: int(open(f"{work}/count-{n}").read()) for n in ("roberta", "distilbert", "defaults")}
    for name, what in (("roberta", "byte-level BPE (tests/fixtures/tokenizers/roberta)"),
                       ("distilbert", "WordPiece (tests/fixtures/tokenizers/distilbert, --postprocess run-qa)")):
        b, p = rows(f"feat-{name}-bertqa"), rows(f"feat-{name}-python")
        outs = [l.split() for l in open(f"{work}/feat-{name}-python.out") if l.strip()]
        py_features = {int(o[1]) for o in outs}
        inner = med(float(o[5]) for o in outs)
        bw, pw = med(r["wall_s"] for r in b), med(r["wall_s"] for r in p)
        agree = "agree" if py_features == {counts[name]} else "DIFFER"
        print(f"  {what}: features: bertqa {counts[name]}, run_qa's preparation "
              f"{', '.join(map(str, sorted(py_features)))} ({agree})")
        print(f"    bertqa features: {bw:.3f} s wall (median of {len(b)}: {walls(b)}), "
              f"{med(r['cpu_s'] for r in b):.2f} s CPU, peak RSS {med(r['rss_mb'] for r in b):.0f} MB; "
              f"the rest of the machine {others(b):.2f} s CPU meanwhile")
        print(f"    run_qa's preparation: {pw:.3f} s wall (median of {len(p)}: {walls(p)}), "
              f"{med(r['cpu_s'] for r in p):.2f} s CPU, peak RSS {med(r['rss_mb'] for r in p):.0f} MB; "
              f"{inner:.3f} s of it loading the tokenizer, reading and building (its own timer); "
              f"the rest of the machine {others(p):.2f} s CPU meanwhile")
        x = pw / bw
        print(f"    run_qa's preparation / bertqa: {pw:.3f} / {bw:.3f} s = {x:.1f}x   "
              f"[{'met' if x >= 5 and agree == 'agree' else 'NOT met'}: target >= 5x]")
    d = rows("feat-defaults-bertqa")
    print(f"  for information, bertqa features at the defaults (vocab/vocab.txt, run_squad's rules): "
          f"{counts['defaults']} features, {med(r['wall_s'] for r in d):.3f} s wall, {med(r['cpu_s'] for r in d):.2f} s CPU")
print(f"\nload average before {before}, after {after} ({cpus} CPUs; the figures need a quiet machine)")
PY
