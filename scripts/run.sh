#!/usr/bin/env bash
# The main job on the bundled local Triton, from a fresh machine: installs the
# vocabulary and the server, builds bertqa (release), starts Triton on the project's
# model repository (gRPC 127.0.0.1:${BERTQA_GRPC_PORT:-18001}), and runs a SQuAD 2.0
# evaluation of our bundled sample (data/sample-squad-v2.json) against the oracle and
# tiny-bert test models, then one `bertqa ask`, and says what to try next. It fails at
# once if one of its ports is in use: it runs only against the server it started. The
# server is stopped at the end unless BERTQA_KEEP_SERVER=1.
. "$(dirname "$0")/common.sh"
cd "$BERTQA_ROOT"
GRPC="${BERTQA_GRPC_PORT:-18001}"
HTTP="${BERTQA_HTTP_PORT:-18000}"
METRICS="${BERTQA_METRICS_PORT:-18002}"
KEEP="${BERTQA_KEEP_SERVER:-0}"
# A demo server kept from an earlier run on these ports is ours (triton.sh reuses it).
if [ "$(bash scripts/triton.sh status --name demo 2>/dev/null | sed -n 's/.*gRPC //p' || true)" != "127.0.0.1:$GRPC" ]; then
  require_free_ports "tritonserver (demo)" gRPC "$GRPC" "BERTQA_GRPC_PORT=PORT" \
    HTTP "$HTTP" "BERTQA_HTTP_PORT=PORT" metrics "$METRICS" "BERTQA_METRICS_PORT=PORT"
fi
bash scripts/install_vocab.sh
log "building bertqa (release)"
cargo build --release --quiet
BQ="$BERTQA_ROOT/target/release/bertqa"
URL="$(bash scripts/triton.sh start --name demo --grpc-port "$GRPC" --http-port "$HTTP" --metrics-port "$METRICS")"
if [ "$KEEP" != 1 ]; then
  trap 'bash "$BERTQA_ROOT/scripts/triton.sh" stop --name demo' EXIT
fi
# Shows a command as it can be pasted into a shell, then runs it.
run() { echo; echo "\$ bertqa $(shell_quote "$@")"; "$BQ" "$@"; }
OUT="${BERTQA_OUT:-$BERTQA_ROOT/target/demo}"
DATA=data/sample-squad-v2.json
run models --url "$URL" --model tiny-bert
cat <<TEXT

The test models are not QA models: their scores check the client, not a model.
  oracle     peaks its logits on the gold answers of the questions it knows (those of
             data/ and tests/fixtures/): a correct client scores 100 exact and F1 with
             it, and every lost point is a defect of the client.
  tiny-bert  has seeded random weights: its answers are meaningless and its scores
             near 0; its timings are those of a small BERT on this machine's CPU.
TEXT
run eval --url "$URL" --model oracle --data "$DATA" --output-dir "$OUT/oracle"
run eval --url "$URL" --model tiny-bert --data "$DATA" --output-dir "$OUT/tiny-bert"
run ask --url "$URL" --model oracle --version-2-with-negative --n-best 3 \
  --question "Who designed the lighthouse at Varne Point?" \
  --context "The lighthouse at Varne Point was built in 1874 by the engineer Miriam Holt, who designed its tower of granite blocks quarried twelve miles inland."
echo
echo "Output files are in $OUT/oracle and $OUT/tiny-bert."
echo
echo "What next (bertqa is $(shell_quote "$BQ"); run it here, where its vocabulary vocab/vocab.txt is):"
echo "- Ask the demo server a question of your own (tiny-bert answers anything, meaninglessly):"
echo "    bertqa $(shell_quote ask --url "$URL" --model tiny-bert --question "When was the lighthouse built?" \
  --context "The lighthouse at Varne Point was built in 1874 by the engineer Miriam Holt.")"
if [ "$KEEP" = 1 ]; then
  echo "  The server keeps running (scripts/triton.sh stop --name demo stops it)."
else
  echo "  The server stops as this script ends: BERTQA_KEEP_SERVER=1 scripts/run.sh leaves it running."
fi
echo "- Your own Triton (gRPC, usually port 8001): list its models, then one model's tensors"
echo "  and how bertqa binds them; then ask it, or evaluate it on a SQuAD file:"
echo "    bertqa models --url HOST:8001"
echo "    bertqa models --url HOST:8001 --model MODEL"
echo "    bertqa ask --url HOST:8001 --model MODEL --question 'QUESTION' --context 'CONTEXT'"
echo "    bertqa eval --url HOST:8001 --model MODEL --data dev-v2.0.json --output-dir out"
echo "  A server that only speaks HTTP (port 8000): add --protocol http to each of these."
