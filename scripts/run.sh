#!/usr/bin/env bash
# The main job on the bundled local Triton, from a fresh machine: installs the
# vocabulary and the server, builds bertqa (release), starts Triton on the project's
# model repository (gRPC 127.0.0.1:${BERTQA_GRPC_PORT:-18001}), and runs a SQuAD 2.0
# evaluation of our bundled sample (data/sample-squad-v2.json) against the oracle and
# tiny-bert test models, then one `bertqa ask`. The server is stopped at the end unless
# BERTQA_KEEP_SERVER=1.
. "$(dirname "$0")/common.sh"
cd "$BERTQA_ROOT"
GRPC="${BERTQA_GRPC_PORT:-18001}"
HTTP="${BERTQA_HTTP_PORT:-18000}"
METRICS="${BERTQA_METRICS_PORT:-18002}"
bash scripts/install_vocab.sh
log "building bertqa (release)"
cargo build --release --quiet
BQ="$BERTQA_ROOT/target/release/bertqa"
URL="$(bash scripts/triton.sh start --name demo --grpc-port "$GRPC" --http-port "$HTTP" --metrics-port "$METRICS")"
if [ "${BERTQA_KEEP_SERVER:-0}" != 1 ]; then
  trap 'bash "$BERTQA_ROOT/scripts/triton.sh" stop --name demo' EXIT
fi
run() { echo; echo "\$ bertqa $*"; "$BQ" "$@"; }
OUT="${BERTQA_OUT:-$BERTQA_ROOT/target/demo}"
DATA=data/sample-squad-v2.json
run models --url "$URL" --model tiny-bert
# The oracle peaks on the gold answers: it validates the pipeline (expect 100 EM); it
# is not a QA model. tiny-bert has seeded random weights: its answers are meaningless,
# the numbers show the client against a compute-bound model.
run eval --url "$URL" --model oracle --data "$DATA" --output-dir "$OUT/oracle"
run eval --url "$URL" --model tiny-bert --data "$DATA" --output-dir "$OUT/tiny-bert"
run ask --url "$URL" --model oracle --version-2-with-negative --n-best 3 \
  --question "Who designed the lighthouse at Varne Point?" \
  --context "The lighthouse at Varne Point was built in 1874 by the engineer Miriam Holt, who designed its tower of granite blocks quarried twelve miles inland."
echo
echo "Output files are in $OUT/oracle and $OUT/tiny-bert."
