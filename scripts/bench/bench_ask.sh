#!/usr/bin/env bash
# Client-side cost of one `bertqa ask` (process start, vocabulary load, tokenizing,
# decoding, printing): the wall time of the whole process minus the time its request
# spent at the server (send → response), over N runs against the `null` model on a local
# Triton. Release build; not part of the tests.
#
#   scripts/bench/bench_ask.sh [N]      (default 30)
#
# BERTQA_BIN=path measures that build instead of building target/release/bertqa (e.g. a
# copy saved before a change, for a side-by-side figure).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
N="${1:-30}"
bash scripts/install_vocab.sh
BQ="${BERTQA_BIN:-}"
if [ -z "$BQ" ]; then cargo build --release --quiet; BQ=target/release/bertqa; fi
URL="$(bash scripts/triton.sh start --name askbench --grpc-port 18601 --http-port 18600 --metrics-port 18602)"
trap 'bash scripts/triton.sh stop --name askbench' EXIT
CTX="The lighthouse at Varne Point was built in 1874 by the engineer Miriam Holt, who designed its tower of granite blocks quarried twelve miles inland. The light was first lit on 3 March 1875 and could be seen from a distance of nineteen nautical miles."
TMP="$(mktemp)"
for i in $(seq 1 "$N"); do
  t0=$(date +%s%N)
  "$BQ" ask --url "$URL" --model null --json --question "Who designed the lighthouse?" --context "$CTX" > "$TMP.out"
  t1=$(date +%s%N)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print((int(sys.argv[3])-int(sys.argv[2]))/1e6, d['latency_ms']['max'])" "$TMP.out" "$t0" "$t1" >> "$TMP"
done
python3 - "$TMP" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
wall = [w for w, _ in rows]; client = [w - s for w, s in rows]
print(f"bertqa ask, {len(rows)} runs against null: wall median {statistics.median(wall):.2f} ms, "
      f"server round trip median {statistics.median(s for _, s in rows):.2f} ms, "
      f"client-side cost median {statistics.median(client):.2f} ms (min {min(client):.2f}, max {max(client):.2f})")
PY
rm -f "$TMP" "$TMP.out"
