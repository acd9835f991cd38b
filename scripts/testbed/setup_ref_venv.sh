#!/usr/bin/env bash
# Creates (once) the Python venv of the reference tools, used only by the golden-data
# and benchmark scripts: transformers 4.46.3 under Python 3.11 (Unicode 14.0 tables),
# whose slow BertTokenizer, SQuAD processors and squad_metrics are the "H" reference of
# the spec, and tritonclient's gRPC and HTTP clients for the Python reference client. No torch.
# Prints the venv's python path on stdout. Not needed to build or test bertqa.
. "$(dirname "$0")/../common.sh"
VENV="$BERTQA_CACHE/ref-venv"
PKGS=(transformers==4.46.3 numpy==1.26.4 "tritonclient[grpc,http]==2.73.0")
ensure_venv "$VENV" "${PKGS[@]}"
echo "$VENV/bin/python"
