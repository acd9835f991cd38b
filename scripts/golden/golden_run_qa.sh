#!/usr/bin/env bash
# Regenerates tests/golden/run-qa/<model>/<dataset>/: run_qa's predictions.json,
# nbest_predictions.json and (SQuAD 2.0) null_odds.json from our reimplementation of its
# rules (scripts/golden/golden_run_qa.py, in the run_qa venv of
# scripts/testbed/setup_runqa_venv.sh), against the test bed's models on a Triton
# started here, over HTTP.
#
#   bash scripts/golden/golden_run_qa.sh [MODEL...]    (default: every model below)
#
# Each line of RUNS: model, tokenizer folder (a save_pretrained folder; "bert-vocab" is
# bert-base-uncased's vocab/vocab.txt saved here as a lower-casing BertTokenizerFast),
# dataset name (the output folder), data file, and extra flags.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
bash scripts/install_vocab.sh
PY="$(bash scripts/testbed/setup_runqa_venv.sh)"
TOK=tests/fixtures/tokenizers
SAMPLE=data/sample-squad-v2.json V2=tests/fixtures/squad/v2-long.json V1=tests/fixtures/squad/v1-long.json
RUNS=(
  "tiny-distilbert   $TOK/distilbert  sample-v2 $SAMPLE --v2"
  "tiny-distilbert   $TOK/distilbert  v2-long   $V2     --v2"
  "tiny-distilbert   $TOK/distilbert  v1-long   $V1"
  "tiny-roberta      $TOK/roberta     sample-v2 $SAMPLE --v2"
  "tiny-roberta      $TOK/roberta     v2-long   $V2     --v2"
  "tiny-deberta-v3   $TOK/deberta-v3  sample-v2 $SAMPLE --v2"
  "tiny-deberta-v3   $TOK/deberta-v3  v2-long   $V2     --v2"
  "tiny-bert-2in     bert-vocab       sample-v2 $SAMPLE --v2"
  "tiny-bert-2in     bert-vocab       v2-long   $V2     --v2"
  "tiny-bert-3in     bert-vocab       sample-v2 $SAMPLE --v2"
  "tiny-bert-3in     bert-vocab       v2-long   $V2     --v2"
  "oracle-wordpiece  bert-vocab       sample-v2 $SAMPLE --v2"
  "oracle-wordpiece  bert-vocab       v2-long   $V2     --v2"
  "oracle-bpe        $TOK/roberta     sample-v2 $SAMPLE --v2"
  "oracle-bpe        $TOK/roberta     v2-long   $V2     --v2"
  "oracle-unigram    $TOK/deberta-v3  sample-v2 $SAMPLE --v2"
  "oracle-unigram    $TOK/deberta-v3  v2-long   $V2     --v2"
)

WORK="$(mktemp -d)"
GRPC=18311 HTTP=18310 METRICS=18312
cleanup() { bash scripts/triton.sh stop --name golden-run-qa || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$PY" - "$WORK/bert-vocab" <<'PY' 2>/dev/null
import sys
from transformers import BertTokenizerFast
BertTokenizerFast(vocab_file="vocab/vocab.txt", do_lower_case=True).save_pretrained(sys.argv[1])
PY
bash scripts/triton.sh start --name golden-run-qa --grpc-port $GRPC --http-port $HTTP --metrics-port $METRICS >/dev/null

OUT=tests/golden/run-qa
for run in "${RUNS[@]}"; do
  read -r model tok name data flags <<< "$run"
  if [ $# -gt 0 ] && [[ " $* " != *" $model "* ]]; then continue; fi
  [ "$tok" = bert-vocab ] && tok="$WORK/bert-vocab"
  [ -d "$tok" ] || die "tokenizer folder $tok does not exist"
  rm -rf "${OUT:?}/$model/$name"
  # shellcheck disable=SC2086  # flags: zero or more words
  "$PY" scripts/golden/golden_run_qa.py "$data" "$OUT/$model/$name" --tokenizer "$tok" \
    --model "$model" --http-port $HTTP $flags
done
