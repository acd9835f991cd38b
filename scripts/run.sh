#!/usr/bin/env bash
# The main job on the bundled local Triton, from a fresh machine: installs the
# vocabulary and the server, builds bertqa (release), starts Triton on the project's
# model repository (gRPC 127.0.0.1:${BERTQA_GRPC_PORT:-18001}), and shows what bertqa
# sees there. The server is stopped at the end unless BERTQA_KEEP_SERVER=1.
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
echo
echo "\$ bertqa models --url $URL"
"$BQ" models --url "$URL"
echo
echo "\$ bertqa models --url $URL --model tiny-bert"
"$BQ" models --url "$URL" --model tiny-bert
