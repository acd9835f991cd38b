#!/usr/bin/env bash
# Generates the model files of the test model repository that are not committed:
# models/repo/bert-onnx/1/tiny_bert.onnx (tinybert.py's weights as an ONNX graph) and
# models/repo/<M>/1/model.onnx for the family models of tinyfamily.py (tiny-distilbert,
# tiny-roberta, tiny-deberta-v3, tiny-bert-2in, tiny-bert-3in). Each is regenerated only
# when its generator (or the tokenizer its vocabulary comes from) changed: a stamp
# beside it holds the sha256 of those inputs. Called by scripts/testbed/setup_triton.sh.
. "$(dirname "$0")/../common.sh"
PY="${TRITON_PYTHON:-$BERTQA_CACHE/triton-venv/bin/python}"
LIB="$BERTQA_ROOT/models/lib"
REPO="$BERTQA_ROOT/models/repo"
TOK="$BERTQA_ROOT/tests/fixtures/tokenizers"

# generate OUT INPUT... -- COMMAND...: runs COMMAND when OUT is missing or its stamp
# differs from the inputs' hash.
generate() {
  local out="$1"; shift
  local inputs=()
  while [ "$1" != "--" ]; do inputs+=("$1"); shift; done
  shift
  local want
  want="$(cat "${inputs[@]}" | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$out" ] || [ "$(cat "$out.sha256" 2>/dev/null)" != "$want" ]; then
    log "generating $out"
    "$@" || die "could not generate $out"
    echo "$want" > "$out.sha256"
  fi
}

generate "$REPO/bert-onnx/1/tiny_bert.onnx" "$LIB/tinybert.py" "$LIB/tinybert_onnx.py" -- \
  "$PY" "$LIB/tinybert_onnx.py" "$REPO/bert-onnx/1/tiny_bert.onnx"
FAMILY=("$LIB/tinybert.py" "$LIB/tinyfamily.py" "$LIB/tinyfamily_onnx.py")
for m in tiny-distilbert tiny-roberta tiny-deberta-v3 tiny-bert-2in tiny-bert-3in; do
  deps=("${FAMILY[@]}")
  case "$m" in
    tiny-roberta) deps+=("$TOK/roberta/tokenizer.json");;
    tiny-deberta-v3) deps+=("$TOK/deberta-v3/tokenizer.json");;
  esac
  generate "$REPO/$m/1/model.onnx" "${deps[@]}" -- "$PY" "$LIB/tinyfamily_onnx.py" "$m" "$REPO/$m/1/model.onnx"
done
