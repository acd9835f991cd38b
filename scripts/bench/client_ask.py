"""Side by side, one server, the same questions: bertqa.Client against the loop a Python
user writes today (a persistent tritonclient.grpc client, transformers' fast tokenizer
with truncation="only_second" and stride 128, an argmax over the windows). Run by
scripts/bench/client_ask.sh; prints one JSON line."""

import json
import statistics
import sys
import time

import numpy as np
import tritonclient.grpc as grpcclient
from transformers import BertTokenizerFast

import bertqa

url, model, data, vocab, calls, many = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
squad = json.load(open(data))
pairs = [(q["question"], p["context"]) for a in squad["data"] for p in a["paragraphs"] for q in p["qas"]]

tokenizer = BertTokenizerFast(vocab_file=vocab, do_lower_case=True)
triton = grpcclient.InferenceServerClient(url)
SEQ = 384


def python_loop(question, context):
    enc = tokenizer(question, context, truncation="only_second", max_length=SEQ, stride=128,
                    return_overflowing_tokens=True, return_offsets_mapping=True, padding="max_length")
    ids = np.asarray(enc["input_ids"], dtype=np.int64)
    types = np.asarray(enc["token_type_ids"], dtype=np.int64)
    mask = np.asarray(enc["attention_mask"], dtype=np.int64)
    inputs = []
    for name, array in (("input__0", ids), ("input__1", types), ("input__2", mask)):
        t = grpcclient.InferInput(name, list(array.shape), "INT64")
        t.set_data_from_numpy(array)
        inputs.append(t)
    result = triton.infer(model, inputs)
    start, end = result.as_numpy("output__0"), result.as_numpy("output__1")
    best = (-np.inf, 0, 0, 0)
    for w in range(ids.shape[0]):
        context_tokens = np.asarray(enc.sequence_ids(w)) == 1
        s = np.where(context_tokens, start[w], -np.inf)
        e = np.where(context_tokens, end[w], -np.inf)
        i, j = int(np.argmax(s)), int(np.argmax(e))
        if j >= i and s[i] + e[j] > best[0]:
            best = (s[i] + e[j], w, i, j)
    _, w, i, j = best
    offsets = enc["offset_mapping"][w]
    return context[offsets[i][0]:offsets[j][1]]


def tokenized(question, context):
    """The windows of one question, tokenized and packed for tritonclient once."""
    enc = tokenizer(question, context, truncation="only_second", max_length=SEQ, stride=128,
                    return_overflowing_tokens=True, padding="max_length")
    inputs = []
    for name, key in (("input__0", "input_ids"), ("input__1", "token_type_ids"), ("input__2", "attention_mask")):
        array = np.asarray(enc[key], dtype=np.int64)
        t = grpcclient.InferInput(name, list(array.shape), "INT64")
        t.set_data_from_numpy(array)
        inputs.append(t)
    return inputs


def median_ms(f, n):
    times = []
    for k in range(n):
        q, c = pairs[k % len(pairs)]
        t = time.perf_counter()
        f(q, c)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


client = bertqa.Client(url, model, vocab=vocab)
# The floor: a bare tritonclient infer of the same windows, already tokenized.
packed = {(q, c): tokenized(q, c) for q, c in pairs}


def bare_infer(question, context):
    triton.infer(model, packed[(question, context)])


for q, c in pairs:  # warm every way
    client.ask(q, c)
    python_loop(q, c)
    bare_infer(q, c)

rows = []
for _ in range(3):  # alternating, three rounds
    rows.append((
        median_ms(lambda q, c: client.ask(q, c), calls),
        median_ms(python_loop, calls),
        median_ms(bare_infer, calls),
    ))
ask_ms = statistics.median(r[0] for r in rows)
loop_ms = statistics.median(r[1] for r in rows)
infer_ms = statistics.median(r[2] for r in rows)

batch = [pairs[k % len(pairs)] for k in range(many)]
many_rows = []
for _ in range(3):
    t = time.perf_counter()
    client.ask_many(batch)
    bertqa_s = time.perf_counter() - t
    t = time.perf_counter()
    for q, c in batch:
        python_loop(q, c)
    many_rows.append((bertqa_s, time.perf_counter() - t))
many_s = statistics.median(r[0] for r in many_rows)
loop_many_s = statistics.median(r[1] for r in many_rows)

print(json.dumps({
    "questions": len(pairs),
    "ask_ms": round(ask_ms, 3),
    "python_loop_ms": round(loop_ms, 3),
    "ask_over_loop": round(ask_ms / loop_ms, 3),
    "bare_infer_ms": round(infer_ms, 3),
    "ask_over_bare_infer": round(ask_ms / infer_ms, 3),
    "ask_many": many,
    "ask_many_s": round(many_s, 4),
    "python_loop_many_s": round(loop_many_s, 4),
    "ask_many_speedup": round(loop_many_s / many_s, 2),
    "rounds": {
        "ask_ms": [round(r[0], 3) for r in rows],
        "loop_ms": [round(r[1], 3) for r in rows],
        "bare_infer_ms": [round(r[2], 3) for r in rows],
    },
}))
