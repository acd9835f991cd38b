#!/usr/bin/env bash
# The Python package's tests (scripts/test.sh runs them after cargo's): builds the wheel
# (a dev-profile maturin build in cargo's target directory, so the bertqa crate that
# `cargo test` compiled is reused and only pyo3 and the bindings compile), installs it
# into the tests' venv (kept in the cache with pytest and the engines bertqa.spark and
# bertqa.ray run on: pyspark and Ray are hundreds of MB; the wheel is installed afresh
# each run), starts a real Triton of the test bed with the models the tests
# use, and runs pytest (python/tests) against it over gRPC and HTTP. The release wheels
# are scripts/wheel.sh's; BERTQA_TEST_WHEEL=FILE tests one of them instead of the dev
# build (scripts/wheel.sh --test). `--wheel-only` builds the dev wheel and prints its path
# (scripts/test.sh builds it before the tests and runs this beside cargo's); with
# BERTQA_CARGO_BIN set, the command the tests compare against is that binary, not one
# built here (`cargo build` here would relink the binary cargo's running tests use: its
# features differ from the test build's).
. "$(dirname "$0")/common.sh"
cd "$BERTQA_ROOT"
TOOLS="$BERTQA_CACHE/maturin-venv"
ensure_venv "$TOOLS" maturin==1.15.0
TARGET="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}"
if [ -n "${BERTQA_TEST_WHEEL:-}" ]; then
  # A release wheel to test (scripts/wheel.sh --test).
  WHEEL="$BERTQA_TEST_WHEEL"
else
  WHEELS="$TARGET/wheels/dev"
  rm -rf "$WHEELS"
  log "building the test wheel (maturin, dev profile)"
  "$TOOLS/bin/maturin" build --profile dev --quiet -o "$WHEELS" >/dev/null
  WHEEL="$(ls "$WHEELS"/bertqa-*.whl)"
fi
if [ "${1:-}" = --wheel-only ]; then
  echo "$WHEEL"
  exit 0
fi
if [ -z "${BERTQA_CARGO_BIN:-}" ]; then
  cargo build --quiet --bin bertqa
  BERTQA_CARGO_BIN="$TARGET/debug/bertqa"
fi
NAME="pytest-$$"
cleanup() { bash scripts/triton.sh stop --name "$NAME" >/dev/null 2>&1 || true; }
trap cleanup EXIT
VENV="$BERTQA_CACHE/python-tests-venv"
ensure_venv "$VENV" pytest==8.3.4 "pyspark[sql]==4.0.1" "ray[data]==2.49.2" pandas==3.1.1 \
  pyarrow==26.0.1
log "installing $(basename "$WHEEL") into $VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
# Three free ports for the server.
read -r GRPC HTTP METRICS < <("$BERTQA_PYTHON" -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
MODELS=(oracle oracle-lossy-1 oracle-slow oracle-nobatch oracle-bpe oracle-text-logits oracle-text-answer qa-text-tokenizer fault-internal)
# And one model of tune's repository, which Client.tune reconfigures.
bash scripts/triton.sh start --name "$NAME" --grpc-port "$GRPC" --http-port "$HTTP" \
  --metrics-port "$METRICS" -- --model-control-mode=explicit "${MODELS[@]/#/--load-model=}" \
  --model-repository="$BERTQA_ROOT/models/tune" --load-model=tune-fixed-cost >/dev/null
log "pytest python/tests (the wheel's bertqa against Triton on :$GRPC gRPC, :$HTTP HTTP)"
BERTQA_TEST_GRPC="127.0.0.1:$GRPC" BERTQA_TEST_HTTP="127.0.0.1:$HTTP" \
  BERTQA_CARGO_BIN="$BERTQA_CARGO_BIN" PATH="$VENV/bin:$PATH" \
  "$VENV/bin/python" -m pytest -p no:cacheprovider -q python/tests "$@"
