"""Goldens for `bertqa eval --postprocess hf` against the live `tiny-bert` model.

Runs transformers 4.46.3's own SQuAD pipeline (slow BertTokenizer, SquadV1/V2Processor,
squad_convert_examples_to_features, compute_predictions_logits) against the same Triton
model bertqa is tested with, over Triton's HTTP/JSON endpoint (JSON floats carry the
exact FP32 values), and writes predictions.json, nbest_predictions.json and (v2)
null_odds.json. transformers is the "H" family of the spec: bertqa's `--postprocess hf`
must reproduce these files (answers exactly, numbers to 1e-6).

usage: python golden_eval.py DATA.json OUT_DIR --vocab vocab.txt --http-port P [--v2]
"""
import argparse
import json
import os
import urllib.request

import numpy as np
from transformers import BertTokenizer
from transformers.data.metrics.squad_metrics import compute_predictions_logits
from transformers.data.processors.squad import (SquadResult, SquadV1Processor, SquadV2Processor,
                                                squad_convert_examples_to_features)

ap = argparse.ArgumentParser()
ap.add_argument("data")
ap.add_argument("out")
ap.add_argument("--vocab", required=True)
ap.add_argument("--http-port", type=int, required=True)
ap.add_argument("--model", default="tiny-bert")
ap.add_argument("--v2", action="store_true")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)

tok = BertTokenizer(a.vocab, do_lower_case=True)
proc = SquadV2Processor() if a.v2 else SquadV1Processor()
examples = proc.get_dev_examples(os.path.dirname(os.path.abspath(a.data)), filename=os.path.basename(a.data))
feats = squad_convert_examples_to_features(examples, tok, max_seq_length=384, doc_stride=128,
                                           max_query_length=64, is_training=False,
                                           return_dataset=False, threads=1, tqdm_enabled=False)


def infer(batch):
    arr = lambda key: np.array([getattr(f, key) for f in batch], dtype=np.int64)  # noqa: E731
    body = {"inputs": [
        {"name": "input__0", "datatype": "INT64", "shape": [len(batch), 384], "data": arr("input_ids").tolist()},
        {"name": "input__1", "datatype": "INT64", "shape": [len(batch), 384], "data": arr("token_type_ids").tolist()},
        {"name": "input__2", "datatype": "INT64", "shape": [len(batch), 384], "data": arr("attention_mask").tolist()},
    ]}
    req = urllib.request.Request(f"http://127.0.0.1:{a.http_port}/v2/models/{a.model}/infer",
                                 data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    out = {o["name"]: np.array(o["data"], dtype=np.float64).reshape(o["shape"]) for o in json.load(urllib.request.urlopen(req))["outputs"]}
    return out["output__0"], out["output__1"]


results = []
for b in range(0, len(feats), 8):
    batch = feats[b:b + 8]
    start, end = infer(batch)
    for i, f in enumerate(batch):
        results.append(SquadResult(f.unique_id, start[i].tolist(), end[i].tolist()))
compute_predictions_logits(examples, feats, results, 20, 30, True,
                           f"{a.out}/predictions.json", f"{a.out}/nbest_predictions.json",
                           f"{a.out}/null_odds.json" if a.v2 else None, False, a.v2, 0.0, tok)
print(f"{a.data}: {len(examples)} questions, {len(feats)} features -> {a.out}")
