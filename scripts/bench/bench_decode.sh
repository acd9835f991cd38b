#!/usr/bin/env bash
# Decoding + scoring benchmark: a synthetic SQuAD-dev-sized input (~10,570 questions,
# ~10,800 features of 384 random logit pairs) decoded by transformers'
# compute_predictions_logits (post_s) and by bertqa (release build, single thread),
# printed side by side. Targets: bertqa well under 0.5 s, at least 100x post_s.
. "$(dirname "$0")/../common.sh"
PY="$(bash "$BERTQA_ROOT/scripts/testbed/setup_ref_venv.sh")"
DIR="${1:-$BERTQA_ROOT/target/bench-decode}"
cd "$BERTQA_ROOT"
cargo build --release --example bench_decode >&2
log "generating the input and timing transformers in $DIR (about a minute)"
REF="$("$PY" scripts/bench/bench_decode.py --out "$DIR" 2>/dev/null)"
OURS="$("${CARGO_TARGET_DIR:-target}/release/examples/bench_decode" "$DIR" 5)"
"$PY" - "$REF" "$OURS" <<'PYEOF'
import json, sys
ref, ours = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"input: {ours['questions']} questions, {ours['features']} features")
print(f"transformers compute_predictions_logits post_s: {ref['post_s']:.3f} s")
print(f"bertqa decode {ours['decode_s']:.3f} s + score {ours['score_s']:.3f} s = {ours['total_s']:.3f} s")
print(f"bertqa thread CPU time: decode {ours['cpu_decode_s']:.3f} s + score {ours['cpu_score_s']:.3f} s = {ours['cpu_total_s']:.3f} s")
print(f"speed-up: {ref['post_s'] / ours['total_s']:.0f}x wall, {ref['post_s'] / ours['cpu_total_s']:.0f}x CPU; "
      f"predictions equal to transformers': {ours['predictions_equal_transformers']}")
print(f"load average during the run: {open('/proc/loadavg').read().split()[0]} (timings are only meaningful on an idle machine)")
PYEOF
