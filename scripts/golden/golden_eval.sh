#!/usr/bin/env bash
# Regenerates tests/golden/eval/: transformers' own pipeline (scripts/golden/golden_eval.py, in
# the reference venv) against the test bed's tiny-bert on a Triton started here.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
bash scripts/install_vocab.sh
PY="$(bash scripts/testbed/setup_ref_venv.sh)"
GRPC=18301 HTTP=18300 METRICS=18302
bash scripts/triton.sh start --name golden --grpc-port $GRPC --http-port $HTTP --metrics-port $METRICS >/dev/null
trap 'bash scripts/triton.sh stop --name golden' EXIT
OUT=tests/golden/eval
"$PY" scripts/golden/golden_eval.py tests/fixtures/squad/v1-long.json "$OUT/v1-long" --vocab vocab/vocab.txt --http-port $HTTP
"$PY" scripts/golden/golden_eval.py tests/fixtures/squad/v2-long.json "$OUT/v2-long" --vocab vocab/vocab.txt --http-port $HTTP --v2
"$PY" scripts/golden/golden_eval.py data/sample-squad-v2.json "$OUT/sample-v2" --vocab vocab/vocab.txt --http-port $HTTP --v2
