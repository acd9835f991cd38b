#!/usr/bin/env bash
# The whole test suite, on a fresh machine or a warm one: installs what the tests need
# (vocabulary, a real Triton server, MLServer and KServe's model server in the cache,
# nginx and Chromium from Debian's packages, pyarrow for test data), then runs format,
# lint, tests (cargo's, and beside them the Python package's: scripts/test_python.sh)
# and docs checks. This is what .ci/run calls.
. "$(dirname "$0")/common.sh"
# Each step's line says when it started, in seconds since the suite did.
log() { printf '[bertqa %4ds] %s\n' "$SECONDS" "$*" >&2; }
cd "$BERTQA_ROOT"
command -v cargo >/dev/null || die "cargo not found: install the Rust toolchain (rustup)"
# The test bed installs beside the build (its installs mostly wait on the network and
# one core; the build takes both): its lines are shown when the tests need it.
log "the test bed (vocabulary, Triton, MLServer and KServe, nginx, Chromium, pyarrow), beside the build"
TESTBED_LOG="$(mktemp "${TMPDIR:-/tmp}/bertqa-testbed.XXXXXX")"
(
  set -e
  bash scripts/install_vocab.sh
  bash scripts/testbed/setup_triton.sh >/dev/null
  bash scripts/testbed/setup_oip.sh >/dev/null
  bash scripts/testbed/setup_nginx.sh >/dev/null
  bash scripts/testbed/setup_chromium.sh >/dev/null
  bash scripts/testbed/setup_data_tools.sh >/dev/null
) >"$TESTBED_LOG" 2>&1 &
TESTBED=$!
# The build's own failures end the script; the test bed (and the Python tests, below)
# are stopped with it.
PYTHON_TESTS=""
PYTHON_LOG="$(mktemp "${TMPDIR:-/tmp}/bertqa-python.XXXXXX")"
stop_jobs() {
  for job in "$TESTBED" $PYTHON_TESTS; do
    pkill -P "$job" 2>/dev/null || true
    kill "$job" 2>/dev/null || true
  done
  rm -f "$TESTBED_LOG" "$PYTHON_LOG"
}
trap stop_jobs EXIT
log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo check -p bertqa (the library alone, without the command line)"
cargo check -p bertqa --quiet
log "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets --quiet -- -D warnings
cargo clippy -p bertqa-python --all-targets --quiet -- -D warnings
log "cargo test"
# The examples first, under their own names: the integration tests run them as programs
# outside the project would (cargo test builds them under hashed names only).
cargo build --examples --quiet
cargo test --all-targets --no-run --quiet
log "the Python package's test wheel"
WHEEL="$(bash scripts/test_python.sh --wheel-only)"
log "waiting for the test bed"
if ! wait "$TESTBED"; then
  cat "$TESTBED_LOG" >&2
  die "the test bed could not be set up (its output is above)"
fi
cat "$TESTBED_LOG" >&2
# The Python package's tests (a fresh venv, a Triton of their own, pytest) run beside
# cargo's: those wait mostly on their servers. Their output is shown once cargo's end.
log "cargo test, and beside it the Python package's tests (the wheel, pytest against Triton)"
BERTQA_TEST_WHEEL="$WHEEL" BERTQA_CARGO_BIN="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}/debug/bertqa" \
  bash scripts/test_python.sh >"$PYTHON_LOG" 2>&1 &
PYTHON_TESTS=$!
# Three tests at a time on two cores: the integration tests wait mostly on their servers.
cargo test --all-targets -- --test-threads 3
cargo test --doc --quiet
log "waiting for the Python package's tests"
if ! wait "$PYTHON_TESTS"; then
  cat "$PYTHON_LOG" >&2
  die "the Python package's tests failed (their output is above)"
fi
PYTHON_TESTS=""
cat "$PYTHON_LOG" >&2
log "cargo doc (warnings are errors)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet
log "all checks passed"
