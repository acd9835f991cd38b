#!/usr/bin/env bash
# Creates (once) the Python venv of transformers' run_qa world, used by the run_qa golden
# generator and the tokenizer-training script (never by bertqa's build or tests):
# transformers 4.57.6 with tokenizers 0.22.2, the Python binding of the same release as
# the `tokenizers` crate bertqa links (Cargo.lock), numpy, tritonclient and sentencepiece
# (the test DeBERTa-v3 tokenizer is a SentencePiece model converted as transformers
# converts the real one). No torch.
# Prints the venv's python path on stdout.
. "$(dirname "$0")/../common.sh"
VENV="$BERTQA_CACHE/runqa-venv"
PKGS=(transformers==4.57.6 tokenizers==0.22.2 numpy==2.3.5 "tritonclient[grpc,http]==2.73.0" sentencepiece==0.2.0)
ensure_venv "$VENV" "${PKGS[@]}"
echo "$VENV/bin/python"
