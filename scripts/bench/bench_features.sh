#!/usr/bin/env bash
# Feature-building speed of bertqa against the Python reference, on the same files.
#
#   bash scripts/bench/bench_features.sh FILE.json [FILE.json ...]
#
# bertqa: the wall time of `bertqa features --data F > /dev/null` (release build, whole
# process, single thread), best of $BENCH_RUNS (default 3).
# Reference: transformers 4.46.3's BertTokenizer + squad_convert_examples_to_features
# (threads=1, 384/128/64), timed like ref_client.py's `feature_s` (tokenizer load,
# example reading and feature building), once per file, in the reference venv.
# Prints one line per file with features/s of both and the ratio.
. "$(dirname "$0")/../common.sh"
[ $# -ge 1 ] || die "usage: bash scripts/bench/bench_features.sh FILE.json [FILE.json ...]"
RUNS="${BENCH_RUNS:-3}"
cd "$BERTQA_ROOT"
bash scripts/install_vocab.sh
VOCAB="$BERTQA_ROOT/vocab/vocab.txt"
PY="$(bash scripts/testbed/setup_ref_venv.sh)"
log "building bertqa (release)"
cargo build --release --quiet
BIN="${CARGO_TARGET_DIR:-$BERTQA_ROOT/target}/release/bertqa"

printf '%-28s %9s %10s %12s %10s %12s %9s\n' file features bertqa_s bertqa_feat/s ref_s ref_feat/s ratio
for f in "$@"; do
  n=$("$BIN" features --data "$f" --vocab "$VOCAB" 2>/dev/null | wc -l)
  best=""
  for _ in $(seq "$RUNS"); do
    t0=$(date +%s.%N)
    "$BIN" features --data "$f" --vocab "$VOCAB" > /dev/null 2>&1 || die "bertqa features failed on $f"
    t1=$(date +%s.%N)
    best=$(python3 -c "a=$t1-$t0; b='$best'; print(min(a, float(b)) if b else a)")
  done
  ref=$("$PY" - "$f" "$VOCAB" <<'PY'
import json, os, sys, time
from transformers.utils import logging
logging.set_verbosity_error()
from transformers import BertTokenizer
from transformers.data.processors.squad import (SquadV1Processor, SquadV2Processor,
                                                squad_convert_examples_to_features)
path, vocab = sys.argv[1], sys.argv[2]
v2 = str(json.load(open(path, encoding="utf-8")).get("version", "")).startswith("v2")
t0 = time.perf_counter()
tok = BertTokenizer(vocab, do_lower_case=True)
proc = SquadV2Processor() if v2 else SquadV1Processor()
examples = proc.get_dev_examples(os.path.dirname(os.path.abspath(path)),
                                 filename=os.path.basename(path))
feats = squad_convert_examples_to_features(examples, tok, max_seq_length=384, doc_stride=128,
                                           max_query_length=64, is_training=False,
                                           return_dataset=False, threads=1,
                                           tqdm_enabled=False)
print(len(feats), time.perf_counter() - t0)
PY
) || { log "the reference failed on $f (an empty question makes transformers raise); skipped"; continue; }
  read -r rn rs <<< "$ref"
  [ "$rn" = "$n" ] || log "warning: $f: bertqa made $n features, the reference $rn"
  python3 - "$f" "$n" "$best" "$rn" "$rs" <<'PY'
import os, sys
f, n, s, rn, rs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
print(f"{os.path.basename(f)[:28]:<28} {n:>9} {s:>10.3f} {n / s:>12.0f} {rs:>10.3f} {rn / rs:>12.1f} {rs / s:>8.0f}x")
PY
done
