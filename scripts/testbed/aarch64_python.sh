#!/usr/bin/env bash
# Runs Python code against an aarch64 wheel on an x86_64 machine, so that the aarch64
# wheel is imported, not only built:
#
#   scripts/testbed/aarch64_python.sh WHEEL CODE [ARG...]
#
# unpacks WHEEL into a temporary folder and runs CODE (Python source; ARGs in
# sys.argv[1:]) with Debian bookworm's aarch64 CPython 3.11 under qemu-user (Debian's
# qemu-user-static), with that folder first on sys.path, in isolated mode (-I: no
# PYTHON* variables, no user or host site-packages). Exits with CODE's status.
#
# Prepares, once, in the cache: the emulator, installed with apt-get when missing (as
# root, or through sudo), and an arm64 sysroot holding the interpreter and the libraries
# it and a manylinux_2_17 extension load, extracted with dpkg -x from Debian's arm64
# packages fetched by an apt of its own (its own lists, sources and empty status in a
# temporary folder), so the host's dpkg, architectures and python3 are left as they
# are. The sysroot is made again when the package list changes.
. "$(dirname "$0")/../common.sh"
[ $# -ge 2 ] || die "usage: $0 WHEEL CODE [ARG...]"
WHEEL="$1" CODE="$2"
shift 2
[ -f "$WHEEL" ] || die "$WHEEL: no such wheel"
"$BERTQA_PYTHON" -m zipfile -l "$WHEEL" >/dev/null 2>&1 || die "$WHEEL: not a wheel (zip)"

SUITE=bookworm
MIRROR=http://deb.debian.org/debian
SECURITY=http://deb.debian.org/debian-security
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# The interpreter and its stdlib (json, ctypes, asyncio, zipfile...), and what the
# extensions load: libc6 (libc, libm, libpthread, libdl), libgcc-s1 (a Rust extension's
# unwinder). Not here, so not importable: ssl, _hashlib (hashlib falls back to its own
# algorithms), sqlite3, lzma, bz2, readline, _uuid.
PACKAGES="python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libc6 libgcc-s1 zlib1g libexpat1 libffi8"
SYSROOT="$BERTQA_CACHE/aarch64-sysroot"
STAMP="$SYSROOT/.bertqa-packages"
PY="$SYSROOT/usr/bin/python3.11"
WORK="" TMP=""
trap 'rm -rf "$WORK" "$TMP"' EXIT

QEMU="$(command -v qemu-aarch64-static || true)"
if [ -z "$QEMU" ]; then
  command -v apt-get >/dev/null || die "qemu-aarch64-static not found, and no apt-get to install qemu-user-static with"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo -n"
  log "installing qemu-user-static (Debian package)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static >&2 \
    || { $SUDO apt-get update -q >&2 && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static >&2; } \
    || die "cannot install qemu-user-static with apt-get"
  QEMU="$(command -v qemu-aarch64-static || true)"
  [ -n "$QEMU" ] || die "no qemu-aarch64-static after installing qemu-user-static"
fi

# make_sysroot: the sysroot, built beside the old one and swapped in whole, the stamp
# last, so that an interrupted build is made again on the next run.
make_sysroot() {
  command -v apt-get >/dev/null || die "apt-get not found: the arm64 sysroot is made from Debian's packages"
  command -v dpkg >/dev/null || die "dpkg not found: the arm64 sysroot is made from Debian's packages"
  [ -r "$KEYRING" ] || die "$KEYRING not found (apt-get install debian-archive-keyring)"
  local work apt
  WORK="$(mktemp -d "$BERTQA_CACHE/aarch64-sysroot.XXXXXX")"
  work="$WORK" apt="$WORK/apt"
  mkdir -p "$apt/etc" "$apt/parts" "$apt/state/lists/partial" "$apt/cache/archives/partial" \
    "$work/debs" "$work/root"
  : > "$apt/state/status"
  cat > "$apt/etc/sources.list" <<EOF
deb [signed-by=$KEYRING] $MIRROR $SUITE main
deb [signed-by=$KEYRING] $MIRROR $SUITE-updates main
deb [signed-by=$KEYRING] $SECURITY $SUITE-security main
EOF
  # The host's apt.conf.d still applies (a proxy, say); its sources, preferences, status
  # and architecture do not. Sandbox::User is the caller: apt's _apt user cannot write
  # into the cache.
  local opts=(-q -o APT::Architecture=arm64 -o APT::Architectures::=arm64
    -o Dir::State="$apt/state" -o Dir::State::status="$apt/state/status" -o Dir::Cache="$apt/cache"
    -o Dir::Etc::SourceList="$apt/etc/sources.list" -o Dir::Etc::SourceParts="$apt/parts"
    -o Dir::Etc::Preferences="$apt/etc/preferences" -o Dir::Etc::PreferencesParts="$apt/parts"
    -o Acquire::Languages=none -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
    -o APT::Sandbox::User="$(id -un)")
  log "fetching Debian $SUITE's arm64 package lists"
  apt-get "${opts[@]}" update >"$work/apt.log" 2>&1 \
    || { cat "$work/apt.log" >&2; die "cannot fetch Debian $SUITE's arm64 package lists from $MIRROR"; }
  log "downloading arm64 $PACKAGES"
  # shellcheck disable=SC2086 # PACKAGES is a list of names
  (cd "$work/debs" && apt-get "${opts[@]}" download $PACKAGES) >"$work/apt.log" 2>&1 \
    || { cat "$work/apt.log" >&2; die "cannot download the arm64 packages $PACKAGES"; }
  local deb
  for deb in "$work"/debs/*.deb; do
    dpkg -x "$deb" "$work/root" || die "dpkg -x $deb failed"
  done
  # A smoke test here, so that a package missing from the list shows as such.
  "$QEMU" -L "$work/root" "$work/root/usr/bin/python3.11" -I -c 'import ctypes, json, zipfile' >&2 \
    || die "the arm64 python3.11 does not start under $QEMU: a package missing from the list?"
  rm -rf "$SYSROOT"
  mv "$work/root" "$SYSROOT"
  echo "$SUITE $PACKAGES" > "$STAMP"
  log "arm64 sysroot ready: $SYSROOT"
}
if [ ! -x "$PY" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$SUITE $PACKAGES" ]; then
  make_sysroot
fi

TMP="$(mktemp -d)"
mkdir "$TMP/wheel"
"$BERTQA_PYTHON" -m zipfile -e "$WHEEL" "$TMP/wheel" || die "$WHEEL: cannot unpack it"
printf '%s\n' "$CODE" > "$TMP/code.py"
# Guest paths not in the sysroot are the host's (qemu's -L), so the temporary folder and
# the current directory are seen as they are. CODE runs as __main__, from code.py, so
# that its tracebacks show its lines.
RUNNER='import sys
src, sys.path[:0], sys.argv = sys.argv[1], [sys.argv[2]], [sys.argv[1]] + sys.argv[3:]
with open(src) as f:
    code = compile(f.read(), src, "exec")
exec(code, {"__name__": "__main__", "__file__": src, "__builtins__": __builtins__})'
status=0
"$QEMU" -L "$SYSROOT" "$PY" -I -c "$RUNNER" "$TMP/code.py" "$TMP/wheel" "$@" || status=$?
[ "$status" = 0 ] || log "error: the code exited with status $status under the aarch64 python ($(basename "$WHEEL"))"
exit "$status"
