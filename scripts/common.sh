# Shared settings for bertqa's scripts. Source it: `. "$(dirname "$0")/common.sh"`.
# Everything downloaded or installed lives in a cache outside the clone, so clean
# clones (CI) reuse it: ${BERTQA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bertqa}.
set -euo pipefail
BERTQA_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BERTQA_CACHE="${BERTQA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bertqa}"
BERTQA_PYTHON="${BERTQA_PYTHON:-python3.11}"
command -v "$BERTQA_PYTHON" >/dev/null 2>&1 || BERTQA_PYTHON=python3
mkdir -p "$BERTQA_CACHE"
log() { printf '[bertqa] %s\n' "$*" >&2; }
die() { printf '[bertqa] error: %s\n' "$*" >&2; exit 1; }

# ensure_venv DIR PKG...: a venv at DIR holding exactly these pinned packages; created
# once, re-installed only when the list changes.
ensure_venv() {
  local venv="$1"; shift
  local stamp="$venv/.bertqa-packages"
  if [ ! -x "$venv/bin/python" ]; then
    log "creating $venv"
    rm -rf "$venv"
    "$BERTQA_PYTHON" -m venv "$venv"
  fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$*" ]; then
    log "installing $* into $venv"
    "$venv/bin/pip" install --quiet "$@" || die "pip install $* failed"
    echo "$*" > "$stamp"
  fi
}
