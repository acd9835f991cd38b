#!/usr/bin/env bash
# usage: scripts/bench/outputs_ab.sh BASE_BIN NEW_BIN [DATA.json ...]
#
# Byte-for-byte comparison of every output file between two bertqa builds (e.g. a copy
# of target/release/bertqa saved before a refactoring, and the build after it). Each
# build runs the same matrix on one local Triton (the whole test repository, models/repo):
#   - on each DATA file, `eval` of the `null`, `oracle` and `tiny-bert` test models
#     (tiny-bert on the first $OUTPUTS_AB_TINY questions, default 300: it is
#     compute-bound), both --postprocess modes, dynamic and fixed length, shared memory on
#     and off, with --save-logits, then `--from-logits` decoding the saved logits again
#     (same --postprocess and --limit); `eval` of the text models `qa-text-logits` (with
#     the vocabulary) and `qa-text-answer` on the first $OUTPUTS_AB_TEXT questions
#     (default 100: the server's tokenizer is python, about 0.1 s a question; no saved
#     logits for a text model); `compare --runs` of the base build's tiny-bert runs
#     (default, hf, dynamic length: the same input for both builds) with --html;
#   - on tests/compare-data/compare-1200.json (the questions `oracle-lossy-*` know):
#     `compare` of `oracle`, `oracle-lossy-1` and `null` (--seed 0, --save-logits: each
#     model's files, compare.json, flips.jsonl); `eval --shard 1/2` and `2/2` of
#     `oracle-lossy-1` and their `merge` (the shards' and merged files, merge --json's
#     stdout); `ask --json` (--n-best 3, --version-2-with-negative) of two questions about
#     each of the first three contexts, to `oracle`, `tiny-bert`, `qa-text-logits` and
#     `qa-text-answer` (stdout).
# Every file the runs write (predictions, n-best, null odds, per-question lines, logits,
# flips, HTML) is compared with `cmp`; the JSON documents that carry timings
# (metrics.json, compare.json, the stdout of `merge --json` and `ask --json`) on all their
# keys but the timings, which differ from run to run (wall_s, throughput, latency_ms,
# phases_s, client, an endpoint's features_per_s and questions_per_s), the two builds'
# work directories taken as one in paths. Not compared: `compare --html` of models (its
# table holds each model's features/s and p99 latency in this run; the page of
# compare --runs, drawn from the same finished runs for both builds, is compared) and the
# text reports on stdout. Default data: the SQuAD-dev-sized file of
# scripts/bench/gen_squad.py, v1.1 and v2. Prints one line per run and file, and exits 1
# when any file differs (or is written by one build only).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
[ $# -ge 2 ] || die "usage: scripts/bench/outputs_ab.sh BASE_BIN NEW_BIN [DATA.json ...]"
BASE="$(realpath "$1")" NEW="$(realpath "$2")"; shift 2
for b in "$BASE" "$NEW"; do [ -x "$b" ] || die "$b: not an executable"; done
TINY="${OUTPUTS_AB_TINY:-300}" TEXT="${OUTPUTS_AB_TEXT:-100}"
COMPARE_DATA=tests/compare-data/compare-1200.json
bash scripts/install_vocab.sh
mkdir -p target/bench
if [ $# -eq 0 ]; then
  [ -f target/bench/dev-sized.json ] || python3 scripts/bench/gen_squad.py target/bench/dev-sized.json >&2
  [ -f target/bench/dev-sized-v2.json ] || python3 scripts/bench/gen_squad.py --v2 target/bench/dev-sized-v2.json >&2
  set -- target/bench/dev-sized.json target/bench/dev-sized-v2.json
fi
WORK="$(realpath -m "${OUTPUTS_AB_WORK:-$(mktemp -d)}")"
mkdir -p "$WORK"
trap 'bash scripts/triton.sh stop --name outputs-ab >/dev/null 2>&1 || true' EXIT
URL="$(bash scripts/triton.sh start --name outputs-ab --grpc-port 18441 --http-port 18440 --metrics-port 18442)"

# The eval matrix: a label, the eval flags of each run, and "text" for a text model
# (no --save-logits, so no --from-logits).
RUNS=(
  "null|--model null"
  "null-fixed|--model null --fixed-seq-len"
  "null-noshm|--model null --shared-memory none"
  "oracle|--model oracle"
  "oracle-hf|--model oracle --postprocess hf"
  "tiny|--model tiny-bert --limit $TINY"
  "tiny-hf|--model tiny-bert --limit $TINY --postprocess hf"
  "tiny-fixed-noshm|--model tiny-bert --limit $TINY --fixed-seq-len --shared-memory none"
  "tiny-dynamic|--model tiny-bert --limit $TINY --dynamic-seq-len"
  "text-logits|--model qa-text-logits --vocab vocab/vocab.txt --limit $TEXT|text"
  "text-answer|--model qa-text-answer --limit $TEXT|text"
)

# A JSON document that carries timings: the same when equal on every other key (in the
# same order), with $WORK/base/ and $WORK/new/ in strings taken as one.
cat > "$WORK/same_json.py" <<'PY'
import json, os, sys
TIMINGS = {"wall_s", "throughput", "latency_ms", "phases_s", "client", "features_per_s",
           "questions_per_s"}
name, paths = sys.argv[1], sys.argv[2:4]
work = os.environ["WORK"]
def norm(x):
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items() if k not in TIMINGS}
    if isinstance(x, list):
        return [norm(v) for v in x]
    if isinstance(x, str):
        return x.replace(f"{work}/base/", f"{work}/SIDE/").replace(f"{work}/new/", f"{work}/SIDE/")
    return x
def diffs(a, b, path):
    if isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b):
        return [d for k in a for d in diffs(a[k], b[k], f"{path}.{k}" if path else k)]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diffs(x, y, f"{path}[{i}]")]
    return [] if json.dumps(a) == json.dumps(b) else [path or "the document"]
a, b = (norm(json.load(open(p))) for p in paths)
d = diffs(a, b, "")
print(("DIFFERENT " if d else "same      ") + name
      + (" (" + ", ".join(d[:5]) + (", ..." if len(d) > 5 else "") + ")" if d else " (all but timings)"))
sys.exit(1 if d else 0)
PY
export WORK

status=0
# compare_tree GROUP LABEL: every file under $WORK/base/GROUP/LABEL against its namesake
# under $WORK/new/, one line each (the documents with timings by same_json.py); a file
# that one build wrote and the other did not differs.
TIMED='(^|/)(metrics|compare)\.json$|\.stdout\.json$'
compare_tree() {
  local a="$WORK/base/$1/$2" b="$WORK/new/$1/$2" f
  (cd "$a" && find . -type f | sort) > "$WORK/files.base"
  (cd "$b" && find . -type f | sort) > "$WORK/files.new"
  while read -r f; do
    f="${f#./}"
    if [ ! -f "$b/$f" ]; then
      echo "DIFFERENT $1 $2 $f (only the base build wrote it)"; status=1
    elif [[ "$f" =~ $TIMED ]]; then
      python3 "$WORK/same_json.py" "$1 $2 $f" "$a/$f" "$b/$f" || status=1
    elif cmp -s "$a/$f" "$b/$f"; then
      echo "same      $1 $2 $f"
    else
      echo "DIFFERENT $1 $2 $f"; status=1
    fi
  done < "$WORK/files.base"
  while read -r f; do
    echo "DIFFERENT $1 $2 ${f#./} (only the new build wrote it)"; status=1
  done < <(comm -13 "$WORK/files.base" "$WORK/files.new")
}
# start SIDE GROUP LABEL: $bin of the side, an empty $out = $WORK/SIDE/GROUP/LABEL and
# its $err beside it.
start() {
  side="$1" bin="$BASE"; [ "$1" = new ] && bin="$NEW"
  out="$WORK/$1/$2/$3" err="$WORK/$1/$2/$3.err"
  rm -rf "$out"; mkdir -p "$out"
}
# try WHAT CMD...: runs CMD (stderr appended to $err), dies naming WHAT when it fails.
try() {
  local what="$1"; shift
  "$@" 2>>"$err" || { tail -3 "$err" >&2; die "$side failed: $what"; }
}

for data in "$@"; do
  d="$(basename "$data" .json)"
  for run in "${RUNS[@]}"; do
    IFS='|' read -r label flags kind <<< "$run"
    for side in base new; do
      start "$side" "$d" "$label"
      logits=(--save-logits); [ "$kind" = text ] && logits=()
      # shellcheck disable=SC2086
      try "$label on $data" "$bin" eval --url "$URL" --data "$data" --output-dir "$out" --quiet \
        "${logits[@]}" $flags >/dev/null
      [ "$kind" = text ] && continue
      # The decoding flags of the run (the others name a server or a model).
      decode_flags=(); read -ra words <<< "$flags"
      for i in "${!words[@]}"; do
        case "${words[$i]}" in --postprocess|--limit) decode_flags+=("${words[$i]}" "${words[$((i + 1))]}");; esac
      done
      try "--from-logits $label on $data" "$bin" eval --from-logits "$out/logits.bin" --data "$data" \
        --output-dir "$out/redecode" --quiet "${decode_flags[@]}" >/dev/null
    done
    compare_tree "$d" "$label"
  done
  # Finished runs compared: the base build's, the same input for both builds, so that even
  # the HTML page (which shows the runs' timings) is the same.
  for side in base new; do
    start "$side" "$d" compare-runs
    try "compare --runs on $data" "$bin" compare --runs "$WORK/base/$d/tiny" "$WORK/base/$d/tiny-hf" \
      "$WORK/base/$d/tiny-dynamic" --data "$data" --limit "$TINY" --seed 0 --output-dir "$out" \
      --html "$out/compare.html" >"$out/stdout.txt"
  done
  compare_tree "$d" compare-runs
done

c="$(basename "$COMPARE_DATA" .json)"
for side in base new; do
  start "$side" "$c" compare
  try "compare on $COMPARE_DATA" "$bin" compare --url "$URL" --data "$COMPARE_DATA" \
    --models oracle oracle-lossy-1 null --seed 0 --save-logits --output-dir "$out" >/dev/null
done
compare_tree "$c" compare

for side in base new; do
  start "$side" "$c" merge
  for s in 1 2; do
    try "eval --shard $s/2 on $COMPARE_DATA" "$bin" eval --url "$URL" --data "$COMPARE_DATA" \
      --model oracle-lossy-1 --shard "$s/2" --save-logits --output-dir "$out/shard-$s" --quiet >/dev/null
  done
  try "merge on $COMPARE_DATA" "$bin" merge --json --output-dir "$out/merged" "$out/shard-1" \
    "$out/shard-2" >"$out/merge.stdout.json"
done
compare_tree "$c" merge

# ask: two questions about each of the data's first three contexts.
python3 - "$COMPARE_DATA" > "$WORK/ask.jsonl" <<'PY'
import json, sys
paragraphs = [p for a in json.load(open(sys.argv[1]))["data"] for p in a["paragraphs"]][:3]
for p in paragraphs:
    print(json.dumps({"context": p["context"], "questions": [q["question"] for q in p["qas"][:2]]}))
PY
for side in base new; do
  start "$side" "$c" ask
  for model in oracle tiny-bert qa-text-logits qa-text-answer; do
    n=0
    while read -r line; do
      n=$((n + 1))
      context="$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["context"])' "$line")"
      mapfile -t questions < <(python3 -c '
import json, sys
for q in json.loads(sys.argv[1])["questions"]: print("--question"); print(q)' "$line")
      try "ask $model" "$bin" ask --url "$URL" --model "$model" --json --n-best 3 \
        --version-2-with-negative --context "$context" "${questions[@]}" >"$out/$model-$n.stdout.json" </dev/null
    done < "$WORK/ask.jsonl"
  done
done
compare_tree "$c" ask

log "outputs in $WORK"
exit "$status"
