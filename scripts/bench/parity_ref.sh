#!/usr/bin/env bash
# Parity check against the Python reference client (transformers' SQuAD pipeline +
# tritonclient): both run the same file against the same model on a local Triton;
# bertqa with --postprocess hf (transformers' rules) and --fixed-seq-len (the reference
# always pads to 384) must give the same answer for every question.
#
#   scripts/bench/parity_ref.sh DATA.json [MODEL]      (MODEL default: bert-onnx)
#
# The reference client is $BERTQA_REF_CLIENT (a ref_client.py kept outside the project):
# a program run here, not part of bertqa or its documentation.
# Not part of the tests (it needs the reference client and takes minutes).
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
DATA="${1:?usage: $0 DATA.json [MODEL]}"; MODEL="${2:-bert-onnx}"
[ -n "${BERTQA_REF_CLIENT:-}" ] || die "set BERTQA_REF_CLIENT to the reference client (ref_client.py)"
bash scripts/install_vocab.sh
cargo build --release --quiet
ref_client
PY="$REFPY"
OUT="${BERTQA_PARITY_OUT:-$(mktemp -d)}"; mkdir -p "$OUT"
URL="$(bash scripts/triton.sh start --name parity --grpc-port 18501 --http-port 18500 --metrics-port 18502)"
trap 'bash scripts/triton.sh stop --name parity' EXIT
V2=""; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if str(d.get('version','')).startswith(('v2','2')) else 1)" "$DATA" && V2="--v2"
log "bertqa eval --postprocess hf on $DATA ($MODEL)"
target/release/bertqa eval --url "$URL" --model "$MODEL" --data "$DATA" --output-dir "$OUT/bertqa" \
  --postprocess hf --fixed-seq-len --quiet --json > "$OUT/bertqa.json"
log "reference client on $DATA ($MODEL); this takes minutes"
"$PY" "$REF" "$DATA" "$MODEL" "$OUT/ref" --url "$URL" --vocab vocab/vocab.txt $V2 > "$OUT/ref.json"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
a = json.load(open(f"{out}/bertqa/predictions.json"))
b = json.load(open(f"{out}/ref/predictions.json"))
diff = [k for k in b if a.get(k) != b[k]]
ref = json.loads(open(f"{out}/ref.json").read().strip().splitlines()[-1])
mine = json.load(open(f"{out}/bertqa.json"))
print(f"questions: reference {len(b)}, bertqa {len(a)}; answers that differ: {len(diff)}")
for k in diff[:10]:
    print(f"  {k}: bertqa {a.get(k)!r} vs reference {b[k]!r}")
print("reference metrics:", {k: ref[k] for k in ref if k in ("exact", "f1", "exact_match")})
print("bertqa metrics:   ", mine["metrics"])
print(f"features: reference {ref['features']}, bertqa {mine['features']}; "
      f"wall: reference {ref['total_s']:.1f} s, bertqa {mine['wall_s']:.1f} s")
sys.exit(1 if diff or len(a) != len(b) else 0)
PY
