#!/usr/bin/env bash
# Starts, stops and reports a local Triton server on the project's model repository.
#
#   scripts/triton.sh start [--repo DIR] [--grpc-port P] [--http-port P]
#                           [--metrics-port P] [--name NAME] [-- extra tritonserver flags]
#   scripts/triton.sh stop   [--name NAME]
#   scripts/triton.sh status [--name NAME]
#
# start fails at once when one of its ports is in use (naming the process holding it):
# it never starts beside, nor reports as its own, a server it did not start. Then it
# installs the server if needed (scripts/testbed/setup_triton.sh), launches it in the
# background, waits until it is ready (the process it started holds the gRPC and HTTP
# ports and answers ready; if it dies, its log tail is printed and start fails), and
# prints the gRPC address (127.0.0.1:PORT). State (pid, log) lives in
# $BERTQA_CACHE/run/NAME.*; starting a running NAME again is a no-op.
. "$(dirname "$0")/common.sh"
cmd="${1:-}"; shift || true
NAME=default REPO="$BERTQA_ROOT/models/repo" GRPC=8001 HTTP=8000 METRICS=8002 EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --repo) REPO="$2"; shift 2;;
    --grpc-port) GRPC="$2"; shift 2;;
    --http-port) HTTP="$2"; shift 2;;
    --metrics-port) METRICS="$2"; shift 2;;
    --name) NAME="$2"; shift 2;;
    --) shift; EXTRA=("$@"); break;;
    *) die "unknown option $1 (see the header of $0)";;
  esac
done
RUN="$BERTQA_CACHE/run"; mkdir -p "$RUN"
PIDF="$RUN/$NAME.pid" LOGF="$RUN/$NAME.log" ADDRF="$RUN/$NAME.addr"
# The tritonserver of NAME runs (not another process that reused its pid).
running() { [ -f "$PIDF" ] && [ "$(cat "/proc/$(cat "$PIDF")/comm" 2>/dev/null)" = tritonserver ]; }
# The process started (pid $1) is the server answering ready on the requested ports.
ready() {
  pid_listens "$1" "$GRPC" && pid_listens "$1" "$HTTP" &&
    curl -sf -o /dev/null "http://127.0.0.1:$HTTP/v2/health/ready"
}
PORTS=(gRPC "$GRPC" "--grpc-port PORT" HTTP "$HTTP" "--http-port PORT" metrics "$METRICS" "--metrics-port PORT")

case "$cmd" in
  start)
    if running && [ -f "$ADDRF" ] && pid_listens "$(cat "$PIDF")" "$(sed 's/.*://' "$ADDRF")"; then
      cat "$ADDRF"; exit 0
    fi
    if running; then  # a start that never finished: start afresh
      kill "$(cat "$PIDF")" 2>/dev/null || true; sleep 1
    fi
    rm -f "$PIDF" "$ADDRF"
    require_free_ports "tritonserver ($NAME)" "${PORTS[@]}"
    ENV_FILE="$(bash "$BERTQA_ROOT/scripts/testbed/setup_triton.sh")"
    # shellcheck disable=SC1090
    . "$ENV_FILE"
    [ -d "$REPO" ] || die "model repository $REPO does not exist"
    log "starting tritonserver ($NAME) on gRPC :$GRPC, HTTP :$HTTP with $REPO; log $LOGF"
    PATH="$TRITON_VENV_BIN:$PATH" LD_LIBRARY_PATH="$TRITON_LD_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      setsid "$TRITONSERVER" --model-repository="$REPO" --backend-directory="$TRITON_BACKEND_DIR" \
      --cache-directory="$TRITON_CACHE_DIR" --grpc-port "$GRPC" --http-port "$HTTP" \
      --metrics-port "$METRICS" --exit-on-error=true "${EXTRA[@]}" > "$LOGF" 2>&1 < /dev/null &
    pid=$!
    echo "$pid" > "$PIDF"
    for _ in $(seq 1 240); do
      if ready "$pid"; then echo "127.0.0.1:$GRPC" > "$ADDRF"; cat "$ADDRF"; exit 0; fi
      if ! kill -0 "$pid" 2>/dev/null; then
        tail -n 30 "$LOGF" >&2; rm -f "$PIDF"
        # Taken since the check above: the usual reason a server dies here.
        ports_in_use "${PORTS[@]}" || true
        die "tritonserver ($NAME) exited during start-up (log above)"
      fi
      sleep 0.5
    done
    tail -n 30 "$LOGF" >&2; die "tritonserver ($NAME) not ready after 120 s (log above)";;
  stop)
    if running; then stop_pid "$(cat "$PIDF")" "tritonserver ($NAME)"; fi
    rm -f "$PIDF" "$ADDRF";;
  status)
    if running; then echo "running: pid $(cat "$PIDF"), gRPC $(cat "$ADDRF" 2>/dev/null)"; else echo "stopped"; exit 3; fi;;
  *) die "usage: $0 start|stop|status [options]";;
esac
