#!/usr/bin/env bash
# The screenshots of the HTML reports in docs/ (docs/reports.md): a `bertqa perf --html`
# sweep and a `bertqa eval --html` run on the local Triton (release build), each page
# rendered by headless Chromium (Debian's package, scripts/testbed/setup_chromium.sh).
#
#   scripts/bench/report_screenshots.sh [MODEL]        (default: bert-onnx)
#
# Writes docs/perf-report.png (concurrency 1 to 8, batches of 8, 1-second windows, a p99
# budget of 150 ms, Triton's metrics) and
# docs/eval-report.png (data/sample-squad-v2.json); the pages themselves stay in
# target/report-screenshots/. Not part of the tests.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
MODEL="${1:-bert-onnx}"
CHROMIUM="$(bash scripts/testbed/setup_chromium.sh)"
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="$BERTQA_ROOT/target/release/bertqa"
OUT="$BERTQA_ROOT/target/report-screenshots"
rm -rf "$OUT" && mkdir -p "$OUT" docs
trap 'bash scripts/triton.sh stop --name screenshots' EXIT
URL="$(bash scripts/triton.sh start --name screenshots --grpc-port 18601 --http-port 18600 --metrics-port 18602)"

log "perf sweep on $MODEL"
"$BQ" perf --url "$URL" --model "$MODEL" --data data/sample-squad-v2.json \
  --concurrency-range 1:8 --batch-size 8 --measurement-interval-ms 1000 --warmup 4 --quiet \
  --latency-threshold 150 --metrics-url 127.0.0.1:18602 --metrics-interval-ms 500 \
  --html "$OUT/perf.html" > "$OUT/perf.txt"
log "eval of $MODEL"
"$BQ" eval --url "$URL" --model "$MODEL" --data data/sample-squad-v2.json \
  --output-dir "$OUT/eval" --quiet --metrics-url 127.0.0.1:18602 \
  --html "$OUT/eval.html" > "$OUT/eval.txt"

# shot PAGE PNG HEIGHT: the page at 1200 pixels wide, HEIGHT high, in a profile of its own.
shot() {
  local profile
  profile="$(mktemp -d)"
  timeout 120 "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --hide-scrollbars \
    --no-first-run --user-data-dir="$profile" --window-size="1200,$3" \
    --screenshot="$2" "file://$1" >/dev/null 2>&1 || die "chromium could not render $1"
  rm -rf "$profile"
  [ -s "$2" ] || die "no screenshot of $1"
}
shot "$OUT/perf.html" docs/perf-report.png 2400
shot "$OUT/eval.html" docs/eval-report.png 1750
log "written: docs/perf-report.png docs/eval-report.png (pages in $OUT)"
