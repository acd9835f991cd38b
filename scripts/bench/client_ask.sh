#!/usr/bin/env bash
# usage: scripts/bench/client_ask.sh [CALLS] [MANY]
#
# bertqa.Client against what a Python user writes today, side by side in one run on one
# local Triton (the `oracle` test model, the bundled sample's questions): the median warm
# `Client.ask` against the median call of a persistent `tritonclient.grpc` client with
# transformers' fast tokenizer (truncation="only_second", stride 128, an argmax over the
# windows), CALLS calls each (default 60) in three alternating rounds; then
# `Client.ask_many` of MANY questions (default 150) against that loop over them; and the
# floor: a bare `tritonclient` infer of the same windows, already tokenized. The server's
# own time is in each. Uses the release wheel (scripts/wheel.sh) or $BERTQA_WHEEL; its
# venv is cached. Prints one JSON line: ask_over_loop (target ≤ 0.4), ask_many_speedup
# (target ≥ 5) and ask_over_bare_infer (target ≤ 1.15).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
CALLS="${1:-60}" MANY="${2:-150}"
WHEEL="${BERTQA_WHEEL:-}"
if [ -z "$WHEEL" ]; then
  WHEEL="$(bash scripts/wheel.sh | head -1)"
fi
[ -f "$WHEEL" ] || die "$WHEEL: no wheel"
bash scripts/install_vocab.sh
VENV="$BERTQA_CACHE/client-bench-venv"
ensure_venv "$VENV" 'tritonclient[grpc]==2.73.0' transformers==4.46.3 numpy==1.26.4
"$VENV/bin/pip" install --quiet --force-reinstall --no-deps "$WHEEL"
trap 'bash scripts/triton.sh stop --name client-bench >/dev/null 2>&1 || true' EXIT
URL="$(bash scripts/triton.sh start --name client-bench --grpc-port 18441 --http-port 18440 \
  --metrics-port 18442 -- --model-control-mode=explicit --load-model=oracle)"
log "bertqa.Client against tritonclient + transformers on $URL ($CALLS calls, ask_many of $MANY)"
"$VENV/bin/python" scripts/bench/client_ask.py "$URL" oracle data/sample-squad-v2.json vocab/vocab.txt "$CALLS" "$MANY"
