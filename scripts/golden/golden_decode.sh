#!/usr/bin/env bash
# Regenerates tests/golden/decode/{v1,v2}/ from our fixtures in tests/fixtures/decode/
# with the reference venv (transformers 4.46.3). Extra arguments go to
# scripts/golden/golden_decode.py (e.g. --logits FILE to decode a live model's logits).
. "$(dirname "$0")/../common.sh"
PY="$(bash "$BERTQA_ROOT/scripts/testbed/setup_ref_venv.sh")"
[ -f "$BERTQA_ROOT/vocab/vocab.txt" ] || bash "$BERTQA_ROOT/scripts/install_vocab.sh" >/dev/null
cd "$BERTQA_ROOT"
for v in v1 v2; do
  "$PY" scripts/golden/golden_decode.py --data "tests/fixtures/decode/squad_$v.json" \
    --out "tests/golden/decode/$v" --float-repr tests/golden/decode/float_repr.json "$@"
done
