#!/usr/bin/env bash
# usage: scripts/bench/cpu_ab.sh BASE_BIN NEW_BIN [RUNS] [DATA.json] [-- extra eval args]
#
# A/B check of the client's CPU per feature between two bertqa builds (e.g. a copy of
# target/release/bertqa saved before a change, and the build after it), the way the
# benchmark suite defines it: CPU of the whole `eval` against `null` on DATA minus the
# same on its first question, per feature. The two builds run alternately RUNS times
# (default 5) on one local Triton, so both see the same machine; CPU is perf's
# task-clock (all threads), reported as medians, with page faults. Then the answer files
# of the last runs are compared byte for byte. The machine's neighbours move single runs
# by a fifth; alternating and medians keep the comparison fair. Needs `perf`.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
[ $# -ge 2 ] || die "usage: scripts/bench/cpu_ab.sh BASE_BIN NEW_BIN [RUNS] [DATA.json] [-- eval args]"
BASE="$1" NEW="$2"; shift 2
RUNS=5
DATA="$BERTQA_ROOT/target/bench/dev-sized.json"
if [ $# -gt 0 ] && [ "$1" != -- ]; then RUNS="$1"; shift; fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then DATA="$1"; shift; fi
[ "${1:-}" = -- ] && shift
command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"
for b in "$BASE" "$NEW"; do [ -x "$b" ] || die "$b: not an executable"; done
if [ ! -f "$DATA" ]; then
  [ "$DATA" = "$BERTQA_ROOT/target/bench/dev-sized.json" ] || die "$DATA: no such file"
  python3 scripts/bench/gen_squad.py "$DATA" >&2
fi
bash scripts/install_vocab.sh
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name cpu-ab >/dev/null 2>&1 || true' EXIT
URL="$(bash scripts/triton.sh start --name cpu-ab --grpc-port 18431 --http-port 18430 --metrics-port 18432)"
python3 - "$DATA" "$WORK/one.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
art = d["data"][0]; para = art["paragraphs"][0]
json.dump({**d, "data": [{**art, "paragraphs": [{**para, "qas": para["qas"][:1]}]}]}, open(sys.argv[2], "w"))
PY

# run LABEL BIN FILE: one eval under perf stat; appends "LABEL FILE task_ms faults".
run() {
  local out="$WORK/out-$1"
  perf stat -x, -e task-clock,page-faults -o "$WORK/stat" -- "$2" eval --url "$URL" \
    --model null --data "$3" --output-dir "$out" --quiet "${@:4}" >/dev/null 2>"$WORK/err" \
    || { tail -3 "$WORK/err" >&2; die "$2 failed on $3"; }
  awk -F, -v l="$1" -v f="$(basename "$3")" '/task-clock/{t=$1} /page-faults/{p=$1} END{print l, f, t, p}' \
    "$WORK/stat" >> "$WORK/runs"
}
log "$RUNS alternating runs of each build on $DATA and on its first question"
for i in $(seq "$RUNS"); do
  for side in base new; do
    bin="$BASE"; [ "$side" = new ] && bin="$NEW"
    run "$side" "$bin" "$WORK/one.json" "$@"
    run "$side" "$bin" "$DATA" "$@"
  done
done
python3 - "$WORK/runs" "$WORK/out-base/metrics.json" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
features = json.load(open(sys.argv[2]))["features"]
def med(side, one, col):
    return statistics.median(float(r[col]) for r in rows if r[0] == side and (r[1] == "one.json") == one)
res = {}
for side in ("base", "new"):
    big, small = med(side, False, 2), med(side, True, 2)
    res[side] = 1e3 * (big - small) / features
    print(f"{side}: {res[side]:.1f} µs CPU/feature (median task-clock {big:.0f} ms, one question {small:.1f} ms), "
          f"page faults {med(side, False, 3):.0f}")
print(f"new/base: {res['new'] / res['base']:.3f} ({features} features)")
PY
for f in predictions.json nbest_predictions.json null_odds.json per_question.jsonl; do
  [ -f "$WORK/out-base/$f" ] || continue
  if cmp -s "$WORK/out-base/$f" "$WORK/out-new/$f"; then echo "$f: identical"; else echo "$f: DIFFERS"; fi
done
