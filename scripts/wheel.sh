#!/usr/bin/env bash
# Builds the Python package for release into target/wheels/: a manylinux_2_17
# (manylinux2014) wheel for x86_64 and one for aarch64, cross-compiled with zig
# (maturin's --zig, the `ziglang` package from PyPI, pinned; no Docker), and the source
# distribution. Checks each wheel: its tags (cp39-abi3, manylinux_2_17 of its
# architecture), its size (at most 15 MB), the architecture of its extension and the
# newest glibc symbol the extension needs (at most 2.17); imports the aarch64 wheel and
# runs it under Debian's qemu-user (scripts/testbed/aarch64_python.sh); and the sdist: at most 1 MB,
# without the tests, goldens, fixtures and test models, yet read by cargo as it is.
# Prints the paths, one a line.
#
#   scripts/wheel.sh                            # both wheels and the sdist
#   BERTQA_WHEEL_ARCHS=x86_64 scripts/wheel.sh  # one architecture
#   scripts/wheel.sh --test                     # and run the pytest suite on the x86_64 wheel
#
# Needs the Rust targets (added with rustup when missing) and readelf (binutils).
. "$(dirname "$0")/common.sh"
cd "$BERTQA_ROOT"
command -v cargo >/dev/null || die "cargo not found: install the Rust toolchain (rustup)"
command -v readelf >/dev/null || die "readelf not found (apt-get install binutils)"
TEST=0
[ "${1:-}" = --test ] && TEST=1
TOOLS="$BERTQA_CACHE/wheel-venv"
ensure_venv "$TOOLS" maturin==1.15.0 ziglang==0.13.0
export PATH="$TOOLS/bin:$PATH"
OUT="$BERTQA_ROOT/target/wheels"
MAX_WHEEL=$((15 * 1000 * 1000))
MAX_SDIST=$((1000 * 1000))
mkdir -p "$OUT"
rm -f "$OUT"/bertqa-*.whl "$OUT"/bertqa-*.tar.gz

# check_wheel ARCH FILE: tags, size, the extension's machine and its newest glibc symbol.
check_wheel() {
  local arch="$1" wheel="$2" machine
  case "$arch" in
    x86_64) machine="Advanced Micro Devices X86-64" ;;
    aarch64) machine="AArch64" ;;
  esac
  case "$(basename "$wheel")" in
    *-cp39-abi3-manylinux_2_17_"$arch".*) ;;
    *) die "$wheel: not tagged cp39-abi3-manylinux_2_17_$arch" ;;
  esac
  local bytes dir so glibc
  bytes="$(stat -c %s "$wheel")"
  [ "$bytes" -le "$MAX_WHEEL" ] || die "$wheel is $bytes bytes, over the 15 MB limit"
  dir="$(mktemp -d)"
  "$BERTQA_PYTHON" -m zipfile -e "$wheel" "$dir"
  so="$(find "$dir" -name '_native*.so' | head -1)"
  [ -n "$so" ] || die "$wheel: no extension module inside"
  readelf -h "$so" | grep -q "Machine: *$machine" || die "$wheel: the extension is not built for $arch"
  glibc="$(readelf -W --dyn-syms "$so" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
  rm -rf "$dir"
  [ "$(printf '%s\nGLIBC_2.17\n' "$glibc" | sort -V | tail -1)" = GLIBC_2.17 ] \
    || die "$wheel: needs $glibc, newer than manylinux_2_17's GLIBC_2.17"
  log "$(basename "$wheel"): $bytes bytes, $arch, newest symbol $glibc"
}

for arch in ${BERTQA_WHEEL_ARCHS:-x86_64 aarch64}; do
  target="$arch-unknown-linux-gnu"
  if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
    log "adding the Rust target $target"
    rustup target add "$target" >&2 || die "rustup target add $target failed"
  fi
  log "building the $arch wheel (maturin --zig, manylinux2014, release, stripped)"
  maturin build --release --strip --zig --compatibility manylinux2014 --target "$target" \
    --out "$OUT" >&2 || die "the $arch wheel did not build"
  check_wheel "$arch" "$(ls "$OUT"/bertqa-*manylinux_2_17_"$arch"*.whl)"
done

# The aarch64 wheel imported and run, not only built: under Debian's qemu-user, with
# Debian's arm64 CPython (scripts/testbed/aarch64_python.sh). It scores a question and
# fails to connect to a dead port, both through the extension.
AARCH64_CHECK='
import platform
import bertqa
assert platform.machine() == "aarch64", platform.machine()
data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "a b c", "qas": [
    {"id": "q1", "question": "a?", "answers": [{"text": "b", "answer_start": 2}]}]}]}]}
report = bertqa.score(data, {"q1": "b"})
assert report["metrics"]["exact_match"] == 100.0, report
try:
    bertqa.Client("127.0.0.1:9", "m", connect_timeout_ms=500)
    raise AssertionError("a dead port connected")
except bertqa.ConnectionError:
    pass
print("imported on", platform.machine(), "bertqa", bertqa.__version__)
'
case " ${BERTQA_WHEEL_ARCHS:-x86_64 aarch64} " in
  *" aarch64 "*)
    log "importing the aarch64 wheel under qemu-user"
    bash scripts/testbed/aarch64_python.sh "$(ls "$OUT"/bertqa-*manylinux_2_17_aarch64*.whl)" \
      "$AARCH64_CHECK" >&2 || die "the aarch64 wheel does not import and run under qemu-user"
    ;;
esac

log "building the source distribution"
maturin sdist --out "$OUT" >&2
sdist="$(ls "$OUT"/bertqa-*.tar.gz)"
bytes="$(stat -c %s "$sdist")"
[ "$bytes" -le "$MAX_SDIST" ] || die "$sdist is $bytes bytes, over the 1 MB limit"
if tar tzf "$sdist" | grep -qE '^bertqa-[^/]*/(tests|models|data|cli/tests|python/tests)/'; then
  die "$sdist carries tests, goldens, fixtures or test models"
fi
unpacked="$(mktemp -d)"
tar xzf "$sdist" -C "$unpacked"
cargo metadata --quiet --format-version 1 --manifest-path "$unpacked"/bertqa-*/python/Cargo.toml \
  >/dev/null || die "$sdist: cargo cannot read the workspace it carries"
rm -rf "$unpacked"
log "sdist: $sdist ($bytes bytes)"

if [ "$TEST" = 1 ]; then
  BERTQA_TEST_WHEEL="$(ls "$OUT"/bertqa-*manylinux_2_17_x86_64*.whl)" bash scripts/test_python.sh -q >&2
fi
ls "$OUT"/bertqa-*.whl "$sdist"
