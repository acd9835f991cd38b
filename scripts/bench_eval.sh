#!/usr/bin/env bash
# End-to-end benchmark: bertqa eval against the Python reference client
# (transformers + tritonclient, batches of 8 sent one after another), on the same local
# Triton, the same `null` model (so the client is what is measured) and the same files,
# in one run. Prints features/s, wall time, client CPU and peak RSS, and the ratios, for
# bertqa at --batch-size 8 (the reference's) and at its defaults.
#
#   scripts/bench_eval.sh [DATA.json ...]
#
# Default data: a SQuAD-dev-sized file made by scripts/gen_squad.py. The reference client
# is $BERTQA_REF_CLIENT, or ../shared/reference/ref_client.py beside the clone when
# present; without it only bertqa is measured. Release build; not part of the tests.
. "$(dirname "$0")/common.sh"
cd "$BERTQA_ROOT"
MODEL="${BERTQA_BENCH_MODEL:-null}"
bash scripts/install_vocab.sh
cargo build --release --quiet
BQ="$BERTQA_ROOT/target/release/bertqa"
REF="${BERTQA_REF_CLIENT:-$BERTQA_ROOT/../shared/reference/ref_client.py}"
[ -f "$REF" ] || { log "no reference client at $REF: measuring bertqa only"; REF=""; }
REFPY=""
[ -n "$REF" ] && REFPY="$(bash scripts/setup_ref_venv.sh)"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"; bash scripts/triton.sh stop --name bench' EXIT
if [ $# -eq 0 ]; then
  python3 scripts/gen_squad.py "$WORK/dev-sized.json" >&2
  set -- "$WORK/dev-sized.json"
fi
URL="$(bash scripts/triton.sh start --name bench --grpc-port 18401 --http-port 18400 --metrics-port 18402)"

measure() { # name outdir cmd... -> appends a JSON line to $WORK/results.jsonl
  local name="$1" out="$2"; shift 2
  /usr/bin/time -f '%e %U %S %M' -o "$WORK/time" "$@" > "$WORK/stdout" 2> "$WORK/stderr" \
    || { tail -5 "$WORK/stderr" >&2; die "$name failed"; }
  python3 - "$name" "$WORK/time" "$WORK/stdout" "$out" >> "$WORK/results.jsonl" <<'PY'
import json, sys
name, tfile, sfile, out = sys.argv[1:]
wall, user, sys_, rss = open(tfile).read().split()[-4:]
lines = [l for l in open(sfile) if l.strip().startswith("{")]
if name == "reference":
    m = json.loads(lines[-1])
    feats, timing = m["features"], {k: m[k] for k in ("feature_s", "infer_s", "post_s")}
else:
    m = json.load(open(f"{out}/metrics.json"))
    feats, timing = m["features"], m["phases_s"]
print(json.dumps({"name": name, "features": feats, "wall_s": float(wall), "cpu_s": float(user) + float(sys_),
                  "rss_mb": int(rss) / 1024, "timing": timing}))
PY
}

for DATA in "$@"; do
  : > "$WORK/results.jsonl"
  V2=""; python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if str(d.get('version','')).startswith(('v2','2')) else 1)" "$DATA" && V2="--v2"
  log "$DATA: bertqa --batch-size 8"
  measure "bertqa --batch-size 8" "$WORK/b8" "$BQ" eval --url "$URL" --model "$MODEL" --data "$DATA" --output-dir "$WORK/b8" --batch-size 8 --quiet
  log "$DATA: bertqa defaults"
  measure "bertqa (defaults)" "$WORK/def" "$BQ" eval --url "$URL" --model "$MODEL" --data "$DATA" --output-dir "$WORK/def" --quiet
  if [ -n "$REF" ]; then
    log "$DATA: reference client (this takes a while)"
    measure "reference" "$WORK/ref" "$REFPY" "$REF" "$DATA" "$MODEL" "$WORK/ref" --url "$URL" --batch 8 --vocab vocab/vocab.txt $V2
  fi
  python3 - "$DATA" "$MODEL" "$WORK/results.jsonl" <<'PY'
import json, sys
data, model, path = sys.argv[1:]
rows = [json.loads(l) for l in open(path)]
ref = next((r for r in rows if r["name"] == "reference"), None)
print(f"\n{data} against model {model!r} ({rows[0]['features']} features)")
print(f"{'client':<24} {'wall s':>8} {'features/s':>11} {'CPU s':>8} {'µs CPU/feat':>12} {'peak RSS MB':>12} {'vs reference':>13}")
for r in rows:
    fps = r["features"] / r["wall_s"]
    ratio = f"{(ref['wall_s'] / r['wall_s']):.1f}x" if ref and r is not ref else ""
    print(f"{r['name']:<24} {r['wall_s']:>8.2f} {fps:>11.1f} {r['cpu_s']:>8.2f} {1e6 * r['cpu_s'] / r['features']:>12.1f} {r['rss_mb']:>12.1f} {ratio:>13}")
for r in rows:
    print(f"  {r['name']}: " + ", ".join(f"{k} {v:.3f} s" for k, v in r["timing"].items()))
PY
done
