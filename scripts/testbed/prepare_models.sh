#!/usr/bin/env bash
# Generates the model files of the test model repository that are not committed:
# models/repo/bert-onnx/1/tiny_bert.onnx (tinybert.py's weights as an ONNX graph).
# Regenerated only when its generator changed. Called by scripts/testbed/setup_triton.sh.
. "$(dirname "$0")/../common.sh"
PY="${TRITON_PYTHON:-$BERTQA_CACHE/triton-venv/bin/python}"
LIB="$BERTQA_ROOT/models/lib"
OUT="$BERTQA_ROOT/models/repo/bert-onnx/1/tiny_bert.onnx"
STAMP="$OUT.sha256"
want="$(cat "$LIB/tinybert.py" "$LIB/tinybert_onnx.py" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$OUT" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ]; then
  log "generating $OUT"
  "$PY" "$LIB/tinybert_onnx.py" "$OUT" || die "could not generate $OUT"
  echo "$want" > "$STAMP"
fi
