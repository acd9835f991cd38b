#!/usr/bin/env bash
# Starts, stops and reports a local Open Inference Protocol server other than Triton,
# serving bertqa's test models (models/oip: oracle, tiny-bert) as a KServe user would.
#
#   scripts/testbed/oip_server.sh start mlserver|kserve [--http-port P] [--grpc-port P]
#   scripts/testbed/oip_server.sh stop  mlserver|kserve
#   scripts/testbed/oip_server.sh status mlserver|kserve
#
# Default ports: MLServer 8080 (HTTP) / 8081 (gRPC), as MLServer's own defaults; KServe
# 8090 / 8091. start fails at once when a port is in use, installs the server if needed
# (scripts/testbed/setup_oip.sh), launches it in the background, waits until it answers
# ready and prints its gRPC address (127.0.0.1:PORT). State (pid, log) lives in
# $BERTQA_CACHE/run/KIND.*.
. "$(dirname "$0")/../common.sh"
cmd="${1:-}"; kind="${2:-}"; shift 2 || die "usage: $0 start|stop|status mlserver|kserve [options]"
case "$kind" in
  mlserver) HTTP=8080 GRPC=8081;;
  kserve) HTTP=8090 GRPC=8091;;
  *) die "unknown server $kind (mlserver or kserve)";;
esac
while [ $# -gt 0 ]; do
  case "$1" in
    --http-port) HTTP="$2"; shift 2;;
    --grpc-port) GRPC="$2"; shift 2;;
    *) die "unknown option $1 (see the header of $0)";;
  esac
done
RUN="$BERTQA_CACHE/run"; mkdir -p "$RUN"
PIDF="$RUN/$kind.pid" LOGF="$RUN/$kind.log" ADDRF="$RUN/$kind.addr"
OIP="$BERTQA_ROOT/models/oip"
running() { [ -f "$PIDF" ] && kill -0 "$(cat "$PIDF")" 2>/dev/null; }
case "$cmd" in
  start)
    if running && [ -f "$ADDRF" ]; then cat "$ADDRF"; exit 0; fi
    rm -f "$PIDF" "$ADDRF"
    require_free_ports "$kind" HTTP "$HTTP" "--http-port PORT" gRPC "$GRPC" "--grpc-port PORT"
    ENV_FILE="$(bash "$BERTQA_ROOT/scripts/testbed/setup_oip.sh")"
    # shellcheck disable=SC1090
    . "$ENV_FILE"
    log "starting $kind on HTTP :$HTTP, gRPC :$GRPC; log $LOGF"
    if [ "$kind" = mlserver ]; then
      MLSERVER_HTTP_PORT="$HTTP" MLSERVER_GRPC_PORT="$GRPC" PYTHONPATH="$OIP" \
        setsid "$MLSERVER" start "$OIP/mlserver" > "$LOGF" 2>&1 < /dev/null &
    else
      PYTHONPATH="$OIP" setsid "$KSERVE_PYTHON" "$OIP/kserve_server.py" \
        --http_port "$HTTP" --grpc_port "$GRPC" > "$LOGF" 2>&1 < /dev/null &
    fi
    pid=$!
    echo "$pid" > "$PIDF"
    for _ in $(seq 1 240); do
      if pid_listens "$pid" "$GRPC" && curl -sf -o /dev/null "http://127.0.0.1:$HTTP/v2/health/ready"; then
        echo "127.0.0.1:$GRPC" > "$ADDRF"; cat "$ADDRF"; exit 0
      fi
      if ! kill -0 "$pid" 2>/dev/null; then
        tail -n 30 "$LOGF" >&2; rm -f "$PIDF"; die "$kind exited during start-up (log above)"
      fi
      sleep 0.5
    done
    tail -n 30 "$LOGF" >&2; die "$kind not ready after 120 s (log above)";;
  stop)
    if running; then stop_pid "$(cat "$PIDF")" "$kind"; fi
    rm -f "$PIDF" "$ADDRF";;
  status)
    if running; then echo "running: pid $(cat "$PIDF"), gRPC $(cat "$ADDRF" 2>/dev/null)"; else echo "stopped"; exit 3; fi;;
  *) die "usage: $0 start|stop|status mlserver|kserve [options]";;
esac
