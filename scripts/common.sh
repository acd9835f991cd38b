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

# ref_client: sets REF to $BERTQA_REF_CLIENT (the Python reference pipeline, a program
# kept outside the project) and REFPY to the python of its venv; both empty, with a note,
# when the variable is not set.
ref_client() {
  REF="${BERTQA_REF_CLIENT:-}"
  REFPY=""
  if [ -z "$REF" ]; then
    log "BERTQA_REF_CLIENT not set: the reference client is not measured"
    return 0
  fi
  [ -f "$REF" ] || die "BERTQA_REF_CLIENT=$REF: no such file"
  REFPY="$(bash "$BERTQA_ROOT/scripts/testbed/setup_ref_venv.sh")"
}

# shell_quote ARG...: the arguments as one line that a shell reads back as the same words
# (quoted only where needed), for commands shown to be pasted.
shell_quote() {
  local a out=()
  for a in "$@"; do
    if [[ "$a" =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+=("$a"); else out+=("${a@Q}"); fi
  done
  printf '%s\n' "${out[*]}"
}

# Listening TCP ports, read from Linux's /proc (no ss, lsof or root needed; other users'
# processes stay anonymous without root).
# listen_inodes PORT: the inodes of the sockets listening on PORT at any address; fails
# when /proc/net/tcp cannot be read.
listen_inodes() {
  [ -r /proc/net/tcp ] || return 1
  local files=(/proc/net/tcp)
  [ -r /proc/net/tcp6 ] && files+=(/proc/net/tcp6)
  awk -v p="$(printf '%04X' "$1")" \
    'FNR > 1 && $4 == "0A" { n = split($2, a, ":"); if (a[n] == p) print $10 }' "${files[@]}"
}
# port_taken PORT: something listens on PORT (without /proc: something answers on it).
port_taken() {
  local inodes
  if inodes="$(listen_inodes "$1")"; then [ -n "$inodes" ]; else (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; fi
}
# pid_listens PID PORT: process PID holds a socket listening on PORT.
pid_listens() {
  local i
  for i in $(listen_inodes "$2" || true); do
    [ -n "$(find "/proc/$1/fd" -lname "socket:\[$i\]" -print -quit 2>/dev/null || true)" ] && return 0
  done
  return 1
}
# port_holder PORT: who listens on PORT, in words.
port_holder() {
  local f i pid inodes
  inodes="$(listen_inodes "$1" || true)"
  for i in $inodes; do
    pid="$(find /proc/[0-9]*/fd -lname "socket:\[$i\]" -print -quit 2>/dev/null || true)"
    pid="${pid#/proc/}"; pid="${pid%%/*}"
    if [ -n "$pid" ]; then
      printf 'pid %s (%s)' "$pid" "$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-100 | sed 's/ *$//')"
      for f in "$BERTQA_CACHE"/run/*.pid; do
        [ "$(cat "$f" 2>/dev/null)" = "$pid" ] &&
          printf ', which `scripts/triton.sh stop --name %s` stops' "$(basename "$f" .pid)"
      done
      return 0
    fi
  done
  if [ -n "$inodes" ]; then
    printf "a process this user cannot see (\`sudo ss -ltnp 'sport = :%s'\` names it)" "$1"
  else
    printf 'a process this script cannot name'
  fi
}
# ports_in_use [LABEL PORT HINT]...: prints an error for each port in use, naming who
# holds it and HINT (how to pick another port); succeeds when it printed any.
ports_in_use() {
  local found=1
  while [ $# -ge 3 ]; do
    if port_taken "$2"; then
      printf '[bertqa] error: port %s (%s) is in use by %s: stop it, or pick another port with %s\n' \
        "$2" "$1" "$(port_holder "$2")" "$3" >&2
      found=0
    fi
    shift 3
  done
  return $found
}
# require_free_ports WHAT [LABEL PORT HINT]...: fails unless all the ports are free, so
# that WHAT never starts beside, nor adopts, a server it did not start.
require_free_ports() {
  local what="$1"
  shift
  if ports_in_use "$@"; then die "$what not started: only a server started here, on free ports, is used"; fi
}

# stop_pid PID WHAT: TERM, up to 30 s to exit, then KILL; logs "stopped WHAT".
stop_pid() {
  kill "$1" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$1" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$1" 2>/dev/null || true
  log "stopped $2"
}
