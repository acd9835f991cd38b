#!/usr/bin/env bash
# Regenerates tests/golden/features/ from the fixtures with transformers 4.46.3 (the
# reference venv) following NVIDIA's rules; see scripts/golden/golden_features.py.
. "$(dirname "$0")/../common.sh"
PY="$(bash "$BERTQA_ROOT/scripts/testbed/setup_ref_venv.sh")"
bash "$BERTQA_ROOT/scripts/install_vocab.sh"
exec "$PY" "$BERTQA_ROOT/scripts/golden/golden_features.py" "$@"
