#!/usr/bin/env bash
# usage: scripts/bench/text_ab.sh [DATA.json] [LIMIT] [-- extra eval args]
#
# Server-side against client-side tokenization of the same model, side by side in one
# run on one local Triton: `eval` of tiny-bert on token ids (bertqa tokenizes), of the
# logits-contract ensemble qa-text-logits, of the answer-contract ensemble qa-text-answer
# (one question per request) and of qa-text-answer-bls, the same answer in a BLS model
# that takes 8 questions per request (the server tokenizes; all over tiny-bert-nobatch),
# over gRPC and over HTTP. Prints, per protocol:
#   - whether qa-text-logits' predictions.json, nbest_predictions.json and
#     null_odds.json are byte-identical to tiny-bert's;
#   - each answer-contract model's agreement with tiny-bert (share of questions with the
#     same answer) and the questions that differ;
#   - bertqa's own CPU (user + sys, getrusage) per question for each, and the ratio:
#     the CPU of the run less that of a run of its first question only (start-up,
#     connecting, the vocabulary), over the questions after the first.
# DATA defaults to the SQuAD-dev-sized file of scripts/bench/gen_squad.py; LIMIT (the
# first N questions; default all) bounds the run: the test bed's tokenizer step is
# python, so the server takes about a tenth of a second per question. MODELS and
# PROTOCOLS (environment) narrow the runs, e.g. MODELS="tiny-bert qa-text-logits" for
# the byte identity alone on a file of long contexts. Build first: `cargo build --release`.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
DATA="$BERTQA_ROOT/target/bench/dev-sized.json"
LIMIT=""
if [ $# -gt 0 ] && [ "$1" != -- ]; then DATA="$1"; shift; fi
if [ $# -gt 0 ] && [ "$1" != -- ]; then LIMIT="$1"; shift; fi
[ "${1:-}" = -- ] && shift
BIN="$BERTQA_ROOT/target/release/bertqa"
[ -x "$BIN" ] || die "$BIN: build it first (cargo build --release)"
if [ ! -f "$DATA" ]; then
  [ "$DATA" = "$BERTQA_ROOT/target/bench/dev-sized.json" ] || die "$DATA: no such file"
  python3 scripts/bench/gen_squad.py "$DATA" >&2
fi
bash scripts/install_vocab.sh
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name text-ab >/dev/null 2>&1 || true' EXIT
LOAD=()
for m in qa-text-tokenizer tiny-bert-nobatch tiny-bert qa-text-postprocess qa-text-logits \
  qa-text-answer qa-text-answer-bls; do
  LOAD+=("--load-model=$m")
done
URL="$(bash scripts/triton.sh start --name text-ab --grpc-port 18441 --http-port 18440 \
  --metrics-port 18442 -- --model-control-mode=explicit "${LOAD[@]}")"
HTTP_URL="127.0.0.1:18440"
LIMIT_ARGS=()
[ -n "$LIMIT" ] && LIMIT_ARGS=(--limit "$LIMIT")

# run PROTOCOL MODEL NAME [LIMIT ARGS]: one eval into $WORK/NAME, its rusage in
# $WORK/NAME.rusage.
run() {
  local protocol="$1" model="$2" name="$3" url="$URL"
  shift 3
  [ "$protocol" = http ] && url="$HTTP_URL"
  local out="$WORK/$name"
  log "eval $model over $protocol ($name)"
  python3 scripts/bench/rusage.py "$out.rusage" "$BIN" eval --url "$url" --protocol "$protocol" \
    --model "$model" --data "$DATA" --output-dir "$out" --quiet --timeout-ms 600000 "$@" \
    >/dev/null 2>"$out.err" || { tail -3 "$out.err" >&2; die "eval $model over $protocol failed"; }
}
MODELS="${MODELS:-tiny-bert qa-text-logits qa-text-answer qa-text-answer-bls}"
PROTOCOLS="${PROTOCOLS:-grpc http}"
for protocol in $PROTOCOLS; do
  for model in $MODELS; do
    run "$protocol" "$model" "$model-$protocol-one" --limit 1 "$@"
    run "$protocol" "$model" "$model-$protocol" "${LIMIT_ARGS[@]}" "$@"
  done
done
python3 - "$WORK" "$MODELS" "$PROTOCOLS" <<'PY'
import json, os, sys
work, models, protocols = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def read(model, protocol, name):
    return open(os.path.join(work, f"{model}-{protocol}", name), "rb").read()
def rusage(name):
    wall, user, sys_, *_ = open(os.path.join(work, f"{name}.rusage")).read().split()
    return float(user) + float(sys_), float(wall)
def cpu(model, protocol, questions):
    """CPU seconds per question after the first, and the run's wall time."""
    whole, wall = rusage(f"{model}-{protocol}")
    one, _ = rusage(f"{model}-{protocol}-one")
    return (whole - one) / max(questions - 1, 1), wall
for protocol in protocols:
    m = json.loads(read("tiny-bert", protocol, "metrics.json"))
    questions = m["questions"]
    files = [f for f in ("predictions.json", "nbest_predictions.json", "null_odds.json")
             if os.path.exists(os.path.join(work, f"tiny-bert-{protocol}", f))
             or os.path.exists(os.path.join(work, f"qa-text-logits-{protocol}", f))]
    same = "qa-text-logits" in models and all(
        read("tiny-bert", protocol, f) == read("qa-text-logits", protocol, f) for f in files)
    a = json.loads(read("tiny-bert", protocol, "predictions.json"))
    print(f"== {protocol}: {questions} questions, {m['features']} features")
    if "qa-text-logits" in models:
        print(f"qa-text-logits {', '.join(files)} byte-identical to tiny-bert's: {'yes' if same else 'NO'}")
    for model in [m for m in ("qa-text-answer", "qa-text-answer-bls") if m in models]:
        b = json.loads(read(model, protocol, "predictions.json"))
        differ = [k for k in a if a[k] != b.get(k)]
        print(f"{model} agrees with tiny-bert on {1 - len(differ) / questions:.4%} "
              f"({len(differ)} differ)")
        for k in differ[:10]:
            print(f"  {k}: {a[k]!r} (client) vs {b.get(k)!r} (server)")
    base, _ = cpu("tiny-bert", protocol, questions)
    for model in models:
        c, wall = cpu(model, protocol, questions)
        print(f"{model:<18} client CPU {1e6 * c:8.1f} us/question "
              f"({c / base:.2f}x tiny-bert's)  wall {wall:.1f} s")
PY
