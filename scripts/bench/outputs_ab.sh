#!/usr/bin/env bash
# usage: scripts/bench/outputs_ab.sh BASE_BIN NEW_BIN [DATA.json ...]
#
# Byte-for-byte comparison of every output file between two bertqa builds (e.g. a copy
# of target/release/bertqa saved before a refactoring, and the build after it). Each
# build runs the same matrix of `eval`s on one local Triton: the `null`, `oracle` and
# `tiny-bert` test models (tiny-bert on the first $OUTPUTS_AB_TINY questions, it is
# compute-bound), both --postprocess modes, dynamic and fixed length, shared memory on and
# off, with --save-logits; then `--from-logits` decodes the saved logits again (same
# --postprocess and --limit). Every
# file the runs write (predictions, n-best, null odds, per-question lines, logits) is
# compared with `cmp`; metrics.json only on its deterministic keys (timings differ from
# run to run). Default data: the SQuAD-dev-sized file of scripts/bench/gen_squad.py, v1.1 and
# v2. Prints one line per run and file, and exits 1 when any file differs.
. "$(dirname "$0")/../common.sh"
cd "$BERTQA_ROOT"
[ $# -ge 2 ] || die "usage: scripts/bench/outputs_ab.sh BASE_BIN NEW_BIN [DATA.json ...]"
BASE="$(realpath "$1")" NEW="$(realpath "$2")"; shift 2
for b in "$BASE" "$NEW"; do [ -x "$b" ] || die "$b: not an executable"; done
TINY="${OUTPUTS_AB_TINY:-300}"
bash scripts/install_vocab.sh
mkdir -p target/bench
if [ $# -eq 0 ]; then
  [ -f target/bench/dev-sized.json ] || python3 scripts/bench/gen_squad.py target/bench/dev-sized.json >&2
  [ -f target/bench/dev-sized-v2.json ] || python3 scripts/bench/gen_squad.py --v2 target/bench/dev-sized-v2.json >&2
  set -- target/bench/dev-sized.json target/bench/dev-sized-v2.json
fi
WORK="${OUTPUTS_AB_WORK:-$(mktemp -d)}"
mkdir -p "$WORK"
trap 'bash scripts/triton.sh stop --name outputs-ab >/dev/null 2>&1 || true' EXIT
URL="$(bash scripts/triton.sh start --name outputs-ab --grpc-port 18441 --http-port 18440 --metrics-port 18442)"

# The matrix: a label and the eval flags of each run.
RUNS=(
  "null|--model null"
  "null-fixed|--model null --fixed-seq-len"
  "null-noshm|--model null --shared-memory none"
  "oracle|--model oracle"
  "oracle-hf|--model oracle --postprocess hf"
  "tiny|--model tiny-bert --limit $TINY"
  "tiny-hf|--model tiny-bert --limit $TINY --postprocess hf"
  "tiny-fixed-noshm|--model tiny-bert --limit $TINY --fixed-seq-len --shared-memory none"
  "tiny-dynamic|--model tiny-bert --limit $TINY --dynamic-seq-len"
)

status=0
for data in "$@"; do
  d="$(basename "$data" .json)"
  for run in "${RUNS[@]}"; do
    label="${run%%|*}" flags="${run#*|}"
    for side in base new; do
      bin="$BASE"; [ "$side" = new ] && bin="$NEW"
      out="$WORK/$side/$d/$label"
      rm -rf "$out"; mkdir -p "$(dirname "$out")"
      # shellcheck disable=SC2086
      "$bin" eval --url "$URL" --data "$data" --output-dir "$out" --quiet --save-logits \
        $flags >/dev/null 2>"$out.err" || { tail -3 "$out.err" >&2; die "$side failed: $label on $data"; }
      # The decoding flags of the run (the others name a server or a model).
      decode_flags=(); read -ra words <<< "$flags"
      for i in "${!words[@]}"; do
        case "${words[$i]}" in --postprocess|--limit) decode_flags+=("${words[$i]}" "${words[$((i + 1))]}");; esac
      done
      "$bin" eval --from-logits "$out/logits.bin" --data "$data" --output-dir "$out/redecode" \
        --quiet "${decode_flags[@]}" >/dev/null 2>"$out.redecode.err" \
        || { tail -3 "$out.redecode.err" >&2; die "$side failed: --from-logits $label on $data"; }
    done
    (cd "$WORK/base/$d/$label" && find . -type f ! -name metrics.json | sort) > "$WORK/files"
    while read -r f; do
      if cmp -s "$WORK/base/$d/$label/$f" "$WORK/new/$d/$label/$f"; then
        echo "same      $d $label ${f#./}"
      else
        echo "DIFFERENT $d $label ${f#./}"; status=1
      fi
    done < "$WORK/files"
    python3 - "$WORK/base/$d/$label/metrics.json" "$WORK/new/$d/$label/metrics.json" <<'PY' || status=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ["metrics", "questions", "features"]
diff = [k for k in keys if a.get(k) != b.get(k)]
print(("DIFFERENT " if diff else "same      ") + sys.argv[1].split("/base/")[1].rsplit("/", 1)[0].replace("/", " ")
      + " metrics.json (" + ", ".join(diff or keys) + ")")
sys.exit(1 if diff else 0)
PY
  done
done
log "outputs in $WORK"
exit "$status"
