#!/usr/bin/env bash
# For users with internet access: downloads the official SQuAD v1.1 and v2.0 dev sets
# and evaluation scripts into data/squad/ (gitignored), as NVIDIA's BERT example does.
# Not used by the tests (they use our own fixtures).
. "$(dirname "$0")/common.sh"
DEST="$BERTQA_ROOT/data/squad"
BASE="https://rajpurkar.github.io/SQuAD-explorer/dataset"
mkdir -p "$DEST/v1.1" "$DEST/v2.0"
fetch() {
  if [ -s "$2" ]; then log "have $2"; return; fi
  log "downloading $1"
  curl -fsSL --retry 3 -o "$2.tmp" "$1" || die "download of $1 failed"
  mv "$2.tmp" "$2"
}
fetch "$BASE/dev-v1.1.json" "$DEST/v1.1/dev-v1.1.json"
fetch "$BASE/dev-v2.0.json" "$DEST/v2.0/dev-v2.0.json"
fetch "https://worksheets.codalab.org/rest/bundles/0xbcd57bee090b421c982906709c8c27e1/contents/blob/" "$DEST/v1.1/evaluate-v1.1.py"
fetch "https://worksheets.codalab.org/rest/bundles/0x6b567e1cf2e041ec80d7098f031c5c9e/contents/blob/" "$DEST/v2.0/evaluate-v2.0.py"
log "SQuAD dev sets in $DEST; e.g. bertqa eval --data $DEST/v1.1/dev-v1.1.json --model bertQA-onnx"
