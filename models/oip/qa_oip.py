"""What bertqa's test models look like on an Open Inference Protocol server other than
Triton (MLServer: mlserver_runtime.py; KServe's model server: kserve_server.py): the
models served, the tensors their metadata declares, and one answer function, so that
both servers answer exactly as Triton's python-backend twins (models/repo) do.

Tensors (Hugging Face names, declared as a KServe user would: the batch dimension is
written as -1, since these servers have no model configuration to declare it):
input_ids, token_type_ids, attention_mask INT64 [-1, 384] -> start_logits, end_logits
FP32 [-1, 384].
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "models", "lib"))
import numpy as np  # noqa: E402

import qa_logits  # noqa: E402

SEQ = 384
INPUTS = [("input_ids", "INT64"), ("token_type_ids", "INT64"), ("attention_mask", "INT64")]
OUTPUTS = [("start_logits", "FP32"), ("end_logits", "FP32")]

# Model name -> qa_logits parameters (the same as models/repo/<name>/config.pbtxt's).
MODELS = {
    "oracle": {"kind": "oracle", "datasets": "data:tests/fixtures", "vocab": "vocab/vocab.txt"},
    "tiny-bert": {"kind": "tiny-bert", "seed": "20241202"},
}


def tensors(specs):
    """Metadata tensor declarations: name, datatype, shape [-1, SEQ]."""
    return [{"name": n, "datatype": d, "shape": [-1, SEQ]} for n, d in specs]


def logits_for(name):
    return qa_logits.Logits(MODELS[name]["kind"], MODELS[name], ROOT, HERE)


def answer(logits, arrays):
    """{input name: [batch, seq] array} -> {output name: float32 [batch, seq] array}.
    Raises ValueError naming a missing input."""
    missing = [n for n, _ in INPUTS if n not in arrays]
    if missing:
        raise ValueError(f"missing input {missing[0]!r}")
    ids, seg, mask = (np.asarray(arrays[n]).reshape(-1, np.asarray(arrays[n]).shape[-1]) for n, _ in INPUTS)
    start, end = logits(ids, seg, mask)
    return {"start_logits": start.astype(np.float32), "end_logits": end.astype(np.float32)}
