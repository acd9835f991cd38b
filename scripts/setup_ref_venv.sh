#!/usr/bin/env bash
# Creates (once) the Python venv used only by the golden-data scripts: transformers
# 4.46.3 under Python 3.11 (Unicode 14.0 tables), whose slow BertTokenizer, SQuAD
# processors and squad_metrics are the "H" reference of the spec. No torch needed.
# Prints the venv's python path on stdout. Not needed to build or test bertqa.
. "$(dirname "$0")/common.sh"
VENV="$BERTQA_CACHE/ref-venv"
STAMP="$VENV/.bertqa-ref-1"
if [ ! -f "$STAMP" ]; then
  log "creating $VENV (transformers==4.46.3, numpy==1.26.4)"
  rm -rf "$VENV"
  "$BERTQA_PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet transformers==4.46.3 numpy==1.26.4 \
    || die "pip install transformers==4.46.3 failed"
  touch "$STAMP"
fi
echo "$VENV/bin/python"
