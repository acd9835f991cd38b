#!/usr/bin/env bash
# Installs (once) the Open Inference Protocol servers other than Triton that bertqa's
# tests run against, each in its own venv under the cache (their dependencies differ):
# MLServer 1.7.1 ($BERTQA_CACHE/mlserver-venv) and KServe's Python model server 0.21.0
# ($BERTQA_CACHE/kserve-venv), each with numpy and transformers for the test models
# (models/oip). Idempotent and quick when already done. Writes $BERTQA_CACHE/oip.env
# (KEY=VALUE lines read by the tests and scripts/testbed/oip_server.sh) and prints its path.
. "$(dirname "$0")/../common.sh"
MODEL_PKGS=(numpy==1.26.4 transformers==4.46.3)
ensure_venv "$BERTQA_CACHE/mlserver-venv" mlserver==1.7.1 "${MODEL_PKGS[@]}"
ensure_venv "$BERTQA_CACHE/kserve-venv" kserve==0.21.0 "${MODEL_PKGS[@]}"
ENV_FILE="$BERTQA_CACHE/oip.env"
cat > "$ENV_FILE.tmp" <<ENV
MLSERVER=$BERTQA_CACHE/mlserver-venv/bin/mlserver
KSERVE_PYTHON=$BERTQA_CACHE/kserve-venv/bin/python
ENV
mv "$ENV_FILE.tmp" "$ENV_FILE"
echo "$ENV_FILE"
