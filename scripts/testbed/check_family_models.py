"""Checks the test bed's models of the BERT family's other QA models (models/repo:
tiny-distilbert, tiny-roberta, tiny-deberta-v3, tiny-bert-2in, tiny-bert-3in,
oracle-wordpiece, oracle-bpe, oracle-unigram) on a running Triton, over HTTP/JSON with
the logits as binary data (exact float32).

Usage: TRITON_PYTHON check_family_models.py --url http://127.0.0.1:PORT [--data FILE]
(default data/sample-squad-v2.json). Prints one line per failed check and exits 1 on any.

The windows are run_qa's, made by transformers' fast tokenizer from the folders of
tests/fixtures/tokenizers (question left-stripped; truncation only_second, max_length
384, stride 128, overflowing windows, offsets, padding to 384 with the pad id):
- each model declares the inputs of its family (ids and mask; tiny-bert-3in also
  token_type_ids) and answers its numpy twin (models/lib/tinyfamily.py) within 1e-5 on
  the first windows (tiny-bert-2in: tiny-bert's twin with segments 0 too);
- tiny-bert-2in and tiny-bert-3in give bit-identical logits for the same ids and mask,
  with the tokenizer's segment ids and with all-zero ones;
- tiny-roberta's position ids are RoBERTa's (real tokens from 2, padding at 1): the
  server agrees with the twin at those positions and not at positions from 0;
- for every family model, padding a window (pad id, mask 0) leaves the logits of its
  real positions unchanged;
- each oracle, given its tokenizer's windows of every question of the file: in a window
  holding the first gold answer, start and end peak on its first and last token and the
  context between their offsets is that answer; an unanswerable question peaks on
  position 0 in every window; other windows carry noise alone (below 0); the question's
  answer decoded run_qa's way (best span over the windows against the smallest null
  score) is a gold one; a window's logits do not depend on its batch.
"""
import argparse
import json
import os
import re
import string
import sys
import urllib.error
import urllib.request

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "models", "lib"))
import tinybert  # noqa: E402
import tinyfamily  # noqa: E402

TOKENIZERS = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
MAX_LENGTH, STRIDE, BATCH = 384, 128, 8
TWIN_WINDOWS = 8  # windows compared with the numpy twin (float64 numpy is slow)
SAME_WINDOWS = 16  # windows sent to tiny-bert-2in and tiny-bert-3in
PEAK = 10.0
FAMILY = {"tiny-distilbert": "distilbert", "tiny-roberta": "roberta", "tiny-deberta-v3": "deberta-v3",
          "tiny-bert-2in": "distilbert", "tiny-bert-3in": "distilbert"}
ORACLES = {"oracle-wordpiece": "distilbert", "oracle-bpe": "roberta", "oracle-unigram": "deberta-v3"}
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg, flush=True)


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def infer(url, model, feeds):
    """feeds: {name: int array [batch, seq]} -> (start, end) float32 [batch, seq]."""
    body = {"inputs": [{"name": n, "datatype": "INT64", "shape": list(a.shape),
                        "data": a.astype(np.int64).ravel().tolist()} for n, a in feeds.items()],
            "outputs": [{"name": n, "parameters": {"binary_data": True}} for n in ("start_logits", "end_logits")]}
    req = urllib.request.Request(f"{url}/v2/models/{model}/infer", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            raw = r.read()
            head = int(r.headers.get("Inference-Header-Content-Length") or len(raw))
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"{model}: HTTP {e.code}: {e.read().decode(errors='replace')[:300]}") from None
    out, pos = {}, head
    for o in json.loads(raw[:head])["outputs"]:
        size = o["parameters"]["binary_data_size"]
        assert o["datatype"] == "FP32", o
        out[o["name"]] = np.frombuffer(raw[pos:pos + size], dtype="<f4").reshape(o["shape"])
        pos += size
    return out["start_logits"], out["end_logits"]


def infer_all(url, model, feeds):
    """infer in batches of at most BATCH rows."""
    n = len(next(iter(feeds.values())))
    parts = [infer(url, model, {k: v[i:i + BATCH] for k, v in feeds.items()}) for i in range(0, n, BATCH)]
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def examples(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return [(qa, p["context"]) for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]


def windows(tok, exs):
    """run_qa's features of the examples: input_ids, attention_mask, token_type_ids (when
    the tokenizer gives them), offset_mapping with None outside the context, example."""
    enc = tok([qa["question"].lstrip() for qa, _ in exs], [c for _, c in exs], truncation="only_second",
              max_length=MAX_LENGTH, stride=STRIDE, return_overflowing_tokens=True,
              return_offsets_mapping=True, padding="max_length", return_token_type_ids=True)
    offsets = [[o if s == 1 else None for o, s in zip(offs, enc.sequence_ids(i))]
               for i, offs in enumerate(enc["offset_mapping"])]
    return {"input_ids": np.array(enc["input_ids"]), "attention_mask": np.array(enc["attention_mask"]),
            "token_type_ids": np.array(enc["token_type_ids"]), "offsets": offsets,
            "example": list(enc["overflow_to_sample_mapping"])}


def normalize_answer(s):
    """The official SQuAD normalization."""
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def check_inputs(url):
    for model in list(FAMILY) + list(ORACLES):
        meta = get(f"{url}/v2/models/{model}")
        names = [i["name"] for i in meta["inputs"]]
        want = tinyfamily.inputs(model) if model in FAMILY else ["input_ids", "attention_mask"]
        if names != want:
            fail(f"{model}: inputs {names}, want {want}")
        if [o["name"] for o in meta["outputs"]] != ["start_logits", "end_logits"]:
            fail(f"{model}: outputs {meta['outputs']}")


def check_family(url, tokenizers, exs):
    for model, folder in FAMILY.items():
        w = windows(tokenizers[folder], exs)
        w = {k: v[:TWIN_WINDOWS] for k, v in w.items()}
        weights, spec = tinyfamily.make_weights(model)
        feeds = {n: w[n] for n in tinyfamily.inputs(model)}
        s, e = infer_all(url, model, feeds)
        ts, te = tinyfamily.forward(weights, spec, w["input_ids"], w["attention_mask"], w["token_type_ids"])
        d = max(np.abs(s - ts).max(), np.abs(e - te).max())
        if not d <= 1e-5:
            fail(f"{model}: logits differ from the numpy twin by {d:.3g}")
        print(f"{model}: {len(s)} windows of {folder}; max |server - numpy twin| {d:.3g}"
              f"{' (bit-identical)' if d == 0 else ''}")
        check_padding(url, model, spec, feeds)
        if model == "tiny-roberta":
            check_roberta_positions(weights, spec, w, s, e)
        if model == "tiny-bert-2in":
            # tiny-bert's own weights (type row 1 aside) with segments 0: tiny-bert.
            bs, be = tinybert.forward(tinybert.make_weights(20241202), w["input_ids"],
                                      np.zeros_like(w["input_ids"]), w["attention_mask"])
            d = max(np.abs(s - bs).max(), np.abs(e - be).max())
            if not d <= 1e-5:
                fail(f"tiny-bert-2in: differs from tiny-bert with segments 0 by {d:.3g}")
    check_2in_3in(url, {k: v[:SAME_WINDOWS] for k, v in windows(tokenizers["distilbert"], exs).items()})


def check_padding(url, model, spec, feeds):
    """One window unpadded, then padded: the real positions' logits are unchanged."""
    n = int(feeds["attention_mask"][0].sum())
    short = {k: v[:1, :n] for k, v in feeds.items()}
    s1, e1 = infer(url, model, short)
    s2, e2 = infer(url, model, {k: v[:1] for k, v in feeds.items()})
    if n == feeds["input_ids"].shape[1] or feeds["input_ids"][0, n] != spec["pad_id"]:
        fail(f"{model}: the check window is not padded with the pad id {spec['pad_id']}")
    d = max(np.abs(s1 - s2[:, :n]).max(), np.abs(e1 - e2[:, :n]).max())
    if not d <= 1e-6:
        fail(f"{model}: padding {n} -> {feeds['input_ids'].shape[1]} changed real positions' logits by {d:.3g}")
    print(f"{model}: padding {n} -> {feeds['input_ids'].shape[1]} changes real positions' logits by {d:.3g}")


def check_roberta_positions(weights, spec, w, s, e):
    ids = w["input_ids"]
    pos = tinyfamily.position_ids(spec, ids)
    m = w["attention_mask"].astype(bool)
    if not (pos[:, 0] == 2).all() or not (pos[~m] == 1).all():
        fail("tiny-roberta: the twin's position ids do not start at 2 with padding at 1")
    real = np.broadcast_to(np.arange(ids.shape[1]), ids.shape)
    zs, ze = tinyfamily.forward(weights, spec, ids, w["attention_mask"], positions=real)
    d = max(np.abs(s - zs)[m].max(), np.abs(e - ze)[m].max())
    if not d > 1e-2:
        fail(f"tiny-roberta: positions from 0 give the server's logits too (within {d:.3g}): the check is blind")
    print(f"tiny-roberta: position ids from 2 (padding 1) match; from 0 they would differ by {d:.3g}")


def check_2in_3in(url, w):
    s2, e2 = infer_all(url, "tiny-bert-2in", {"input_ids": w["input_ids"], "attention_mask": w["attention_mask"]})
    for label, seg in (("the tokenizer's segment ids", w["token_type_ids"]),
                       ("zero segment ids", np.zeros_like(w["token_type_ids"]))):
        if not seg.any() and label.startswith("the tokenizer"):
            fail("tiny-bert-3in: the windows carry no segment id 1")
        s3, e3 = infer_all(url, "tiny-bert-3in", {"input_ids": w["input_ids"], "attention_mask": w["attention_mask"],
                                                  "token_type_ids": seg})
        if not (np.array_equal(s2, s3) and np.array_equal(e2, e3)):
            n = int((s2 != s3).sum() + (e2 != e3).sum())
            fail(f"tiny-bert-2in and tiny-bert-3in ({label}): {n} logits differ")
        else:
            print(f"tiny-bert-2in == tiny-bert-3in bit for bit over {len(s2)} windows ({label})")


def check_oracle(url, model, tok, exs):
    w = windows(tok, exs)
    feeds = {"input_ids": w["input_ids"], "attention_mask": w["attention_mask"]}
    s, e = infer_all(url, model, feeds)
    # A window's logits do not depend on its batch: each alone gives the same.
    for i in (0, len(s) - 1):
        s1, e1 = infer(url, model, {k: v[i:i + 1] for k, v in feeds.items()})
        if not (np.array_equal(s1[0], s[i]) and np.array_equal(e1[0], e[i])):
            fail(f"{model}: window {i} answers differently alone than in a batch")
    spaced = 0
    for x, (qa, ctx) in enumerate(exs):
        rows = [i for i, ex in enumerate(w["example"]) if ex == x]
        golds = [a for a in qa["answers"] if a["text"].strip()]
        impossible = qa.get("is_impossible", False) or not golds
        where = f"{model}: {qa['id']} ({qa['question'][:40]!r})"
        best, null = (-np.inf, None), np.inf
        gold_window = False
        for i in rows:
            offs = w["offsets"][i]
            null = min(null, s[i][0] + e[i][0])
            ctx_pos = [p for p, o in enumerate(offs) if o is not None]
            si = max(ctx_pos, key=lambda p: s[i][p])
            ei = max((p for p in ctx_pos if si <= p < si + 30), key=lambda p: e[i][p])
            if s[i][si] + e[i][ei] > best[0]:
                best = (s[i][si] + e[i][ei], ctx[offs[si][0]:offs[ei][1]])
            top_s, top_e = int(np.argmax(s[i])), int(np.argmax(e[i]))
            if impossible:
                if (top_s, top_e) != (0, 0) or s[i][0] != PEAK or e[i][0] != PEAK:
                    fail(f"{where}: unanswerable, but window {i} peaks at {top_s}, {top_e}")
                continue
            a0 = golds[0]["answer_start"]
            a1 = a0 + len(golds[0]["text"])
            inside = [p for p in ctx_pos if offs[p][1] > offs[p][0] and offs[p][0] < a1 and offs[p][1] > a0]
            whole = inside and offs[ctx_pos[0]][0] <= a0 and a1 <= offs[ctx_pos[-1]][1]
            if whole:
                gold_window = True
                if (top_s, top_e) != (inside[0], inside[-1]) or s[i][top_s] != PEAK or e[i][top_e] != PEAK:
                    fail(f"{where}: window {i} peaks at {top_s}, {top_e}, the gold tokens are {inside[0]}, {inside[-1]}")
                    continue
                text = ctx[offs[top_s][0]:offs[top_e][1]]
                if normalize_answer(text) != normalize_answer(golds[0]["text"]):
                    fail(f"{where}: window {i} peaks on {text!r}, not {golds[0]['text']!r}")
                spaced += text[:1].isspace()
            elif s[i].max() >= 0 or e[i].max() >= 0:
                fail(f"{where}: window {i} does not hold the answer but peaks at {top_s}, {top_e}")
        if not impossible and not gold_window:
            fail(f"{where}: no window holds the gold answer {golds[0]['text']!r}")
        pred = "" if null > best[0] else best[1]
        want = [normalize_answer(a["text"]) for a in golds] or [""]
        if normalize_answer(pred) not in want:
            fail(f"{where}: decodes to {pred!r}, gold {want}")
    print(f"{model}: {len(exs)} questions, {len(s)} windows; {spaced} peak spans start with a space")
    return spaced


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--data", default=os.path.join(ROOT, "data", "sample-squad-v2.json"))
    args = ap.parse_args()
    from transformers import AutoTokenizer
    tokenizers = {f: AutoTokenizer.from_pretrained(os.path.join(TOKENIZERS, f))
                  for f in ("distilbert", "roberta", "deberta-v3")}
    for f, t in tokenizers.items():
        if not t.is_fast or t.padding_side != "right":
            fail(f"{f}: not a fast tokenizer padding on the right")
    exs = examples(args.data)
    check_inputs(args.url)
    check_family(args.url, tokenizers, exs)
    spaced = {m: check_oracle(args.url, m, tokenizers[f], exs) for m, f in ORACLES.items()}
    # Offsets as each family reports them: a SentencePiece piece includes the space
    # before its word, byte-level BPE with trim_offsets and WordPiece do not.
    if spaced["oracle-unigram"] == 0:
        fail("oracle-unigram: no answer span starts with the space before its word")
    for m in ("oracle-wordpiece", "oracle-bpe"):
        if spaced[m]:
            fail(f"{m}: {spaced[m]} answer spans start with a space")
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
