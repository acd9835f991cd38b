#!/usr/bin/env bash
# Installs (once) a real Triton Inference Server for bertqa's tests and demos: the
# tritonserver 2.51 binary shipped in the nvidia-pytriton==0.7.0 wheel, with the python
# backend, in a venv under the cache (${BERTQA_CACHE:-~/.cache/bertqa}/triton-venv).
# Idempotent and quick when already done. Writes $BERTQA_CACHE/triton.env (KEY=VALUE
# lines the tests and scripts/triton.sh read) and prints its path.
. "$(dirname "$0")/../common.sh"
VENV="$BERTQA_CACHE/triton-venv"
# numpy for the test models, transformers (slow BertTokenizer) for the oracle model,
# onnx + onnxruntime for the ONNX test models (bert-onnx, the family models),
# tokenizers (the version transformers 4.46.3 wants; it reads the tokenizer.json files
# of tests/fixtures/tokenizers, written by 0.22.2) for the text models' tokenizer step
# and the tokenizer oracles.
PKGS=(nvidia-pytriton==0.7.0 numpy==1.26.4 transformers==4.46.3 onnx==1.17.0 onnxruntime==1.20.1 tokenizers==0.20.3)
ensure_venv "$VENV" "${PKGS[@]}"
PYVER="$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TS="$SITE/pytriton/tritonserver"
[ -x "$TS/bin/tritonserver" ] || die "no tritonserver binary in $TS/bin (nvidia-pytriton layout changed?)"
STUB="$TS/python_backend_stubs/$PYVER/triton_python_backend_stub"
[ -f "$STUB" ] || die "no python backend stub for Python $PYVER in $TS/python_backend_stubs"
# The python backend wants its stub next to libtriton_python.so: lay out our own
# backend directory.
BACKENDS="$BERTQA_CACHE/triton-backends"
mkdir -p "$BACKENDS/python"
for f in "$TS/backends/python/libtriton_python.so" "$TS/backends/python/triton_python_backend_utils.py" "$STUB"; do
  dest="$BACKENDS/python/$(basename "$f")"
  cmp -s "$f" "$dest" 2>/dev/null || cp "$f" "$dest"
done
chmod +x "$BACKENDS/python/triton_python_backend_stub"
ENV_FILE="$BERTQA_CACHE/triton.env"
cat > "$ENV_FILE.tmp" <<ENV
TRITONSERVER=$TS/bin/tritonserver
TRITON_BACKEND_DIR=$BACKENDS
TRITON_CACHE_DIR=$TS/caches
TRITON_LD_LIBRARY_PATH=$SITE/nvidia_pytriton.libs
TRITON_VENV_BIN=$VENV/bin
TRITON_PYTHON=$VENV/bin/python
ENV
mv "$ENV_FILE.tmp" "$ENV_FILE"
# Generated model files (not committed).
TRITON_PYTHON="$VENV/bin/python" bash "$BERTQA_ROOT/scripts/testbed/prepare_models.sh"
echo "$ENV_FILE"
