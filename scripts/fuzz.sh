#!/usr/bin/env bash
# Fuzzing (not part of .ci/run): runs each cargo-fuzz target (fuzz/fuzz_targets/:
# squad_reader, hf_rows, mrqa, parquet, any_data, features, decode; harnesses in
# fuzz/harness.rs) for SECONDS (default
# 300) one after another, and prints executions, seconds and crashes per target.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and, on a stable toolchain,
# RUSTC_BOOTSTRAP=1 (set here) for the -Z flags it passes. Built with debug assertions
# (overflow checks on), without a sanitizer (the code under test is safe Rust).
# Corpora live in fuzz/corpus/<target> (gitignored), seeded from the kept inputs in
# tests/fixtures/fuzz/<target> and the project's SQuAD files; crashes land in
# fuzz/artifacts/<target>. A crash: fix it, then copy the input into
# tests/fixtures/fuzz/<target>/ so that `cargo test --test it fuzz::` replays it.
# The uncased vocabulary (scripts/install_vocab.sh) is used when installed.
. "$(dirname "$0")/common.sh"
SECONDS_PER_TARGET="${1:-300}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(squad_reader hf_rows mrqa parquet any_data features decode)
command -v cargo-fuzz >/dev/null 2>&1 || die "cargo-fuzz is not installed: cargo install cargo-fuzz"
export RUSTC_BOOTSTRAP=1
cd "$BERTQA_ROOT/fuzz"
FLAGS=(--sanitizer none --debug-assertions)
cargo fuzz build "${FLAGS[@]}" >&2
status=0
for t in "${TARGETS[@]}"; do
  mkdir -p "corpus/$t" "artifacts/$t"
  seeds=("$BERTQA_ROOT/tests/fixtures/fuzz/$t")
  case "$t" in
    squad_reader|any_data) seeds+=("$BERTQA_ROOT/tests/fixtures/squad" "$BERTQA_ROOT/data");;
    mrqa) seeds+=("$BERTQA_ROOT/tests/fixtures/mrqa");;
  esac
  log "fuzzing $t for $SECONDS_PER_TARGET s"
  logf="artifacts/$t/fuzz.log"
  set +e
  cargo fuzz run "${FLAGS[@]}" "$t" "corpus/$t" "${seeds[@]}" -- \
    -max_total_time="$SECONDS_PER_TARGET" -max_len=8192 -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 >"$logf" 2>&1
  rc=$?
  set -e
  execs="$(grep -E '^stat::number_of_executed_units' "$logf" | awk '{print $2}')"
  secs="$(grep -E '^stat::average_exec_per_sec' "$logf" | awk '{print $2}')"
  crashes="$(find "artifacts/$t" -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' | wc -l)"
  printf '%-13s exit %d  executions %s  exec/s %s  seconds %s  crash/timeout/oom files %s  corpus %s\n' \
    "$t" "$rc" "${execs:-?}" "${secs:-?}" "$SECONDS_PER_TARGET" "$crashes" "$(ls "corpus/$t" | wc -l)"
  if [ "$rc" -ne 0 ]; then
    status=1
    tail -40 "$logf" >&2
  fi
done
exit "$status"
