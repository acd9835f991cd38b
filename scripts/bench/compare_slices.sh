#!/usr/bin/env bash
# usage: scripts/bench/compare_slices.sh BASE_BIN NEW_BIN [PAIRS]
#
# What the slices (docs/algorithm.md, "Slices") add to compare's wall time over a
# SQuAD-dev-sized file (scripts/bench/gen_squad.py: 10,570 questions): `compare --runs` of
# two finished runs, by a build without slices (BASE_BIN, e.g. the commit before) and one
# with them (NEW_BIN), PAIRS alternating pairs (default 5), the default --bootstrap
# 10000. The reference run is `eval` of the `null` model by NEW_BIN (its
# per_question.jsonl holds the slices); the other is the same run with its answers
# changed as a deployment's would be (half the questions given their first gold answer,
# a fifth the gold answer's first word, the rest kept), so that exact match, F1 and
# the changed answers spread over the slices as a real comparison's do. No server takes
# part in the timed runs. Prints one JSON line: each build's median wall seconds and
# `added_s` (target ≤ 1 s).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
[ $# -ge 2 ] || die "usage: scripts/bench/compare_slices.sh BASE_BIN NEW_BIN [PAIRS]"
BASE="$1" NEW="$2" PAIRS="${3:-5}"
for b in "$BASE" "$NEW"; do [ -x "$b" ] || die "$b: not an executable"; done
bash scripts/install_vocab.sh
WORK="$(mktemp -d "${TMPDIR:-/tmp}/bertqa-slices-bench.XXXXXX")"
trap 'bash scripts/triton.sh stop --name slices-bench >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$BERTQA_PYTHON" scripts/bench/gen_squad.py "$WORK/dev.json" --vocab vocab/vocab.txt
URL="$(bash scripts/triton.sh start --name slices-bench --grpc-port 18491 --http-port 18490 \
  --metrics-port 18492 -- --model-control-mode=explicit --load-model=null)"
"$NEW" eval --url "$URL" --model null --data "$WORK/dev.json" --vocab vocab/vocab.txt \
  --output-dir "$WORK/reference" --quiet >/dev/null || die "eval of null failed"
bash scripts/triton.sh stop --name slices-bench >/dev/null 2>&1 || true
"$BERTQA_PYTHON" - "$WORK/dev.json" "$WORK/reference" "$WORK/changed" <<'PY'
import json, os, random, shutil, sys
data, ref, out = sys.argv[1:]
shutil.copytree(ref, out)
rng = random.Random(1)
golds = {qa["id"]: [a["text"] for a in qa.get("answers", [])]
         for art in json.load(open(data))["data"] for p in art["paragraphs"] for qa in p["qas"]}
answers = json.load(open(os.path.join(ref, "predictions.json")))
for qid in answers:
    r, gold = rng.random(), golds.get(qid) or [""]
    if r < 0.5:
        answers[qid] = gold[0]
    elif r < 0.7:
        answers[qid] = gold[0].split(" ")[0]
json.dump(answers, open(os.path.join(out, "predictions.json"), "w"))
PY
run() { # $1: binary; prints wall seconds
  local start end
  start=$(date +%s.%N)
  "$1" compare --runs "$WORK/reference" "$WORK/changed" --data "$WORK/dev.json" --json \
    >/dev/null || die "$1 compare --runs failed"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
run "$NEW" >/dev/null # warm the page cache
WITHOUT=() WITH=()
for _ in $(seq "$PAIRS"); do
  WITHOUT+=("$(run "$BASE")")
  WITH+=("$(run "$NEW")")
done
"$BERTQA_PYTHON" - "${WITHOUT[*]}" "${WITH[*]}" <<'PY'
import json, statistics, sys
without = [float(x) for x in sys.argv[1].split()]
with_ = [float(x) for x in sys.argv[2].split()]
a, b = statistics.median(without), statistics.median(with_)
print(json.dumps({"questions": 10570, "base_s": round(a, 3), "slices_s": round(b, 3),
                  "added_s": round(b - a, 3), "target_added_s": 1.0,
                  "runs": {"base_s": without, "slices_s": with_}}))
PY
