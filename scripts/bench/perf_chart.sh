#!/usr/bin/env bash
# The latency-throughput chart of the README: `bertqa perf` concurrency sweeps on the
# local Triton (release build), written under docs/ (SVG chart, perf_analyzer CSV, JSON,
# text report).
#
#   scripts/bench/perf_chart.sh [MODEL ...]        (default: bert-onnx null)
#
# Each MODEL gets docs/perf-MODEL.{svg,csv,json,txt}: concurrency 1 to 8, batches of 8,
# 2-second windows, features of data/sample-squad-v2.json. Not part of the tests.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
[ $# -gt 0 ] || set -- bert-onnx null
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="$BERTQA_ROOT/target/release/bertqa"
trap 'bash scripts/triton.sh stop --name perfchart' EXIT
URL="$(bash scripts/triton.sh start --name perfchart --grpc-port 18501 --http-port 18500 --metrics-port 18502)"
mkdir -p docs
for model in "$@"; do
  log "perf sweep on $model"
  "$BQ" perf --url "$URL" --model "$model" --data data/sample-squad-v2.json \
    --concurrency-range 1:8 --batch-size 8 --measurement-interval-ms 2000 --warmup 4 \
    --csv "docs/perf-$model.csv" --svg "docs/perf-$model.svg" --json \
    > "docs/perf-$model.json"
  "$BQ" perf --url "$URL" --model "$model" --data data/sample-squad-v2.json \
    --concurrency-range 4 --batch-size 8 --measurement-interval-ms 2000 --warmup 4 --quiet \
    > "docs/perf-$model.txt"
done
log "written: $(ls docs/perf-* | tr '\n' ' ')"
