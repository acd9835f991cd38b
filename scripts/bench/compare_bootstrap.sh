#!/usr/bin/env bash
# usage: scripts/bench/compare_bootstrap.sh [PAIRS]
#
# What compare's statistics cost: `bertqa compare` of two models on a SQuAD-dev-sized file
# (scripts/bench/gen_squad.py: 10,570 questions) with --bootstrap 10000 (the default)
# against the same compare with --bootstrap 1, side by side on one local Triton (the `null`
# model against itself: the client is what is measured), PAIRS alternating
# pairs (default 3). Release build. Prints one JSON line: the median wall seconds of
# each and `added_s` (target ≤ 1 s).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
PAIRS="${1:-3}"
bash scripts/install_vocab.sh
cargo build --release --quiet --bin bertqa
BIN="$BERTQA_ROOT/target/release/bertqa"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bertqa-compare-bench.XXXXXX")"
trap 'bash scripts/triton.sh stop --name compare-bench >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$BERTQA_PYTHON" scripts/bench/gen_squad.py "$WORK/dev.json" --vocab vocab/vocab.txt
URL="$(bash scripts/triton.sh start --name compare-bench --grpc-port 18481 --http-port 18480 \
  --metrics-port 18482 -- --model-control-mode=explicit --load-model=null)"
run() { # $1: rounds; prints wall seconds
  local start end
  rm -rf "$WORK/out"
  start=$(date +%s.%N)
  "$BIN" compare --url "$URL" --models "null,null@$URL" --data "$WORK/dev.json" \
    --vocab vocab/vocab.txt --output-dir "$WORK/out" --bootstrap "$1" --json >/dev/null \
    || die "compare --bootstrap $1 failed"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
run 1 >/dev/null # warm the server and the page cache
WITH=() WITHOUT=()
for _ in $(seq "$PAIRS"); do
  WITHOUT+=("$(run 1)")
  WITH+=("$(run 10000)")
done
"$BERTQA_PYTHON" - "${WITHOUT[*]}" "${WITH[*]}" <<'PY'
import json, statistics, sys
without = [float(x) for x in sys.argv[1].split()]
with_ = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(without), statistics.median(with_)
print(json.dumps({"questions": 10570, "bootstrap_1_s": round(a, 3), "bootstrap_10000_s": round(b, 3),
                  "added_s": round(b - a, 3), "target_added_s": 1.0,
                  "runs": {"bootstrap_1_s": without, "bootstrap_10000_s": with_}}))
PY
