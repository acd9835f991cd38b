#!/usr/bin/env bash
# Installs (once) the Python tools that write test data in the formats bertqa reads
# (pyarrow for Parquet, as the Hugging Face hub writes it: never the crate under test)
# in a venv under the cache, and prints the path of its python.
. "$(dirname "$0")/../common.sh"
VENV="$BERTQA_CACHE/data-venv"
ensure_venv "$VENV" pyarrow==18.1.0
echo "$VENV/bin/python"
