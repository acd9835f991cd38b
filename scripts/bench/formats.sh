#!/usr/bin/env bash
# usage: scripts/bench/formats.sh [RUNS] [EXTRA.json ...]
#
# The data formats side by side (release build, one local Triton):
# 1. Same answers: the SQuAD-dev-sized v1.1 and v2 files (scripts/bench/gen_squad.py) and
#    any EXTRA SQuAD files, converted by scripts/data/convert.py (Python's json/gzip,
#    pyarrow; never bertqa) to Hugging Face JSON Lines (plain and gzip), Parquet (one
#    file and two shards) and MRQA (the answerable questions, gzip); `eval` of the oracle
#    on each must write predictions.json and nbest_predictions.json byte-identical to the
#    run on the SQuAD JSON of the same questions, with the same metrics.
# 2. Reading speed: the dev-sized file repeated 9 times (95,130 questions) in each
#    format; the whole `bertqa features` process, median wall time of RUNS (default 3)
#    per format, and its ratio to SQuAD JSON (target: at most 1.5).
# Prints a line per check; exits 1 when a file differs.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
RUNS="${1:-3}"; shift || true
PY="$(bash scripts/testbed/setup_data_tools.sh)"
bash scripts/install_vocab.sh
cargo build --release --quiet
B="$BERTQA_ROOT/target/release/bertqa"
mkdir -p target/bench
[ -f target/bench/dev-sized.json ] || python3 scripts/bench/gen_squad.py target/bench/dev-sized.json >&2
[ -f target/bench/dev-sized-v2.json ] || python3 scripts/bench/gen_squad.py --v2 target/bench/dev-sized-v2.json >&2
WORK="$(mktemp -d)"
trap 'bash scripts/triton.sh stop --name formats >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
URL="$(bash scripts/triton.sh start --name formats --grpc-port 18451 --http-port 18450 --metrics-port 18452)"
status=0
evaluate() { # OUT DATA...
  local out="$1"; shift
  local args=()
  for d in "$@"; do args+=(--data "$d"); done
  "$B" eval --url "$URL" --model oracle "${args[@]}" --output-dir "$out" --json --quiet \
    | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["metrics"], sort_keys=True))'
}
same() { # LABEL BASE_DIR DIR BASE_METRICS METRICS
  local verdict=same
  for f in predictions.json nbest_predictions.json; do
    cmp -s "$2/$f" "$3/$f" || verdict=DIFFERENT
  done
  [ "$4" = "$5" ] || verdict="$verdict (metrics DIFFER)"
  printf '%-10s %s\n' "$verdict" "$1"
  case "$verdict" in same) ;; *) status=1;; esac
}
for data in target/bench/dev-sized.json target/bench/dev-sized-v2.json "$@"; do
  name="$(basename "$data" .json)"
  c="$WORK/$name"
  "$PY" scripts/data/convert.py "$data" "$c"
  base="$(evaluate "$c/out-squad" "$data")"
  for f in rows.jsonl rows.jsonl.gz rows.parquet; do
    m="$(evaluate "$c/out-$f" "$c/$f")"
    same "$name $f" "$c/out-squad" "$c/out-$f" "$base" "$m"
  done
  m="$(evaluate "$c/out-shards" "$c/rows-1.parquet" "$c/rows-2.parquet")"
  same "$name rows-1.parquet + rows-2.parquet" "$c/out-squad" "$c/out-shards" "$base" "$m"
  ans="$(evaluate "$c/out-answerable" "$c/answerable.json")"
  m="$(evaluate "$c/out-mrqa" "$c/mrqa.jsonl.gz")"
  same "$name mrqa.jsonl.gz (against answerable.json)" "$c/out-answerable" "$c/out-mrqa" "$ans" "$m"
done

big="$WORK/big"
"$PY" scripts/data/convert.py target/bench/dev-sized.json "$big" --repeat 9
questions="$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(len(p["qas"]) for a in d["data"] for p in a["paragraphs"]))' "$big/squad.json")"
median_wall() { # DATA...
  local args=() times=()
  for d in "$@"; do args+=(--data "$d"); done
  for _ in $(seq 1 "$RUNS"); do
    local t0 t1
    t0="$(date +%s.%N)"; "$B" features "${args[@]}" > /dev/null; t1="$(date +%s.%N)"
    times+=("$(python3 -c "print($t1 - $t0)")")
  done
  printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (RUNS + 1) / 2 ))p"
}
squad_s="$(median_wall "$big/squad.json")"
printf 'reading %s questions, whole `bertqa features`, median of %s runs\n' "$questions" "$RUNS"
printf '%-32s %8.2f s  1.00x\n' "SQuAD JSON" "$squad_s"
for f in rows.jsonl rows.jsonl.gz rows.parquet mrqa.jsonl.gz; do
  s="$(median_wall "$big/$f")"
  printf '%-32s %8.2f s  %.2fx\n' "$f" "$s" "$(python3 -c "print($s / $squad_s)")"
done
exit "$status"
