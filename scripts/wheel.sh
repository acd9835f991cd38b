#!/usr/bin/env bash
# Builds the Python package for release into target/wheels/: the wheel of this platform
# (cp39-abi3, the manylinux tag of maturin's own check, optimized and stripped; at most
# 15 MB) and the source distribution (`pip install bertqa-*.tar.gz` builds it with
# maturin and cargo). Prints both paths.
#
#   scripts/wheel.sh            # then: pip install target/wheels/bertqa-*.whl
. "$(dirname "$0")/common.sh"
cd "$BERTQA_ROOT"
command -v cargo >/dev/null || die "cargo not found: install the Rust toolchain (rustup)"
TOOLS="$BERTQA_CACHE/maturin-venv"
ensure_venv "$TOOLS" maturin==1.15.0
OUT="$BERTQA_ROOT/target/wheels"
MAX_BYTES=$((15 * 1000 * 1000))
rm -f "$OUT"/bertqa-*.whl "$OUT"/bertqa-*.tar.gz
log "building the wheel (maturin, release, stripped)"
"$TOOLS/bin/maturin" build --release --strip --out "$OUT"
log "building the source distribution"
"$TOOLS/bin/maturin" sdist --out "$OUT"
wheel="$(ls "$OUT"/bertqa-*.whl)"
sdist="$(ls "$OUT"/bertqa-*.tar.gz)"
bytes="$(stat -c %s "$wheel")"
[ "$bytes" -le "$MAX_BYTES" ] || die "$wheel is $bytes bytes, over the 15 MB limit"
log "wheel: $wheel ($bytes bytes)"
log "sdist: $sdist ($(stat -c %s "$sdist") bytes)"
printf '%s\n%s\n' "$wheel" "$sdist"
