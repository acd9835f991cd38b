"""Small seeded models in the shapes of the BERT family's other QA models, and the numpy
twin of their ONNX graphs (tinyfamily_onnx.py). NOT trained models: seeded random
weights, meaningless answers. They exist so that a client's handling of each family's
inputs (two inputs, pad ids, RoBERTa's position ids, relative positions) is exercised
against a real server, with logits recomputable here.

Every model is tinybert.py's post-layer-norm encoder (embeddings, layer norm, masked
self-attention, tanh-approximated GELU, QA head); they differ in their embeddings:

- tiny-distilbert: vocabulary 30522 (bert-base-uncased's), absolute positions
  0..seq-1, no token-type embedding, pad id 0.
- tiny-roberta: vocabulary of tests/fixtures/tokenizers/roberta, pad id 1, position ids
  as transformers' RoBERTa makes them from the ids (`create_position_ids_from_input_ids`:
  m = ids != pad; cumsum(m) * m + pad, so real tokens count from 2 and padding sits
  at 1), 514 position rows, its one token-type row always added.
- tiny-deberta-v3: vocabulary of tests/fixtures/tokenizers/deberta-v3, pad id 0, no
  token-type and no absolute position embedding (DeBERTa-v3's position_biased_input is
  false): each head adds a learned bias per relative distance j - i, clipped to
  [-REL_SPAN, REL_SPAN], to its attention scores (one table shared by the layers).
- tiny-bert-3in / tiny-bert-2in: tinybert.py's weights (seed 20241202) with token-type
  row 1 set equal to row 0; 3in takes token_type_ids, 2in adds row 0. The same ids and
  mask give the same logits, bit for bit, whatever the segment ids.

Like tinybert.py, the forward pass runs in float64 (the ONNX graphs too) and only the
logits are rounded to float32, so that they are the same on every x86-64 machine and
committed goldens made from them hold elsewhere.

    python tinyfamily.py < {"model": NAME, "input_ids": [[...]], "attention_mask": [[...]],
                             "token_type_ids": [[...]] (optional)}
prints {"start": [[...]], "end": [[...]]} (exact float32 values).
"""
import json
import os

import numpy as np

import tinybert

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOKENIZERS = os.path.join(ROOT, "tests", "fixtures", "tokenizers")
HIDDEN, LAYERS, HEADS, INTERMEDIATE = 64, 2, 4, 128
REL_SPAN = 16
MASK_BIAS = -10000.0

# name -> how the model is made. `tokenizer`: the folder whose vocabulary size the
# word embedding takes (None: `vocab`). `types`: token-type rows added (0: none;
# "3in": the token_type_ids input selects the row; "row0": row 0 always added).
SPECS = {
    "tiny-distilbert": dict(seed=20250601, vocab=30522, tokenizer=None, positions="absolute",
                            max_positions=512, types=0, pad_id=0, ln_eps=1e-12),
    "tiny-roberta": dict(seed=20250602, vocab=None, tokenizer="roberta", positions="roberta",
                         max_positions=514, types="row0", type_rows=1, pad_id=1, ln_eps=1e-5),
    "tiny-deberta-v3": dict(seed=20250603, vocab=None, tokenizer="deberta-v3", positions="relative",
                            max_positions=0, types=0, pad_id=0, ln_eps=1e-7),
    "tiny-bert-3in": dict(tinybert=True, positions="absolute", types="3in", pad_id=0),
    "tiny-bert-2in": dict(tinybert=True, positions="absolute", types="row0", pad_id=0),
}


def tokenizer_vocab_size(folder):
    """The number of ids of a tokenizer.json: its model's vocabulary and added tokens."""
    with open(os.path.join(TOKENIZERS, folder, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    ids = list(vocab.values()) if isinstance(vocab, dict) else list(range(len(vocab)))
    ids += [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


def inputs(name):
    """The model's input names, in the order of its config."""
    return ["input_ids", "attention_mask"] + (["token_type_ids"] if SPECS[name]["types"] == "3in" else [])


def make_weights(name):
    """Seeded float32 weights of model `name` (tinybert.py's layout, plus `rel` for the
    relative-position bias), and its spec with `vocab` and `ln_eps` filled in."""
    spec = dict(SPECS[name])
    if spec.get("tinybert"):
        w = tinybert.make_weights(20241202)
        w["type"] = w["type"].copy()
        w["type"][1] = w["type"][0]
        spec.update(vocab=tinybert.VOCAB, max_positions=tinybert.MAX_POSITIONS, ln_eps=tinybert.LN_EPS)
        return w, spec
    if spec["vocab"] is None:
        spec["vocab"] = tokenizer_vocab_size(spec["tokenizer"])
    rng = np.random.default_rng(spec["seed"])

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = {"word": normal(spec["vocab"], HIDDEN, std=0.5)}
    if spec["max_positions"]:
        w["pos"] = normal(spec["max_positions"], HIDDEN, std=0.5)
    if spec["types"]:
        w["type"] = normal(spec.get("type_rows", 2), HIDDEN, std=0.5)
    if spec["positions"] == "relative":
        w["rel"] = normal(2 * REL_SPAN + 1, HEADS, std=1.0)
    w["emb_ln_g"], w["emb_ln_b"] = np.ones(HIDDEN, np.float32), np.zeros(HIDDEN, np.float32)
    w["layers"] = []
    tinybert.add_encoder_and_head(w, normal)
    return w, spec


def position_ids(spec, ids):
    """[batch, seq] position ids of the absolute position embedding (None: none)."""
    if spec["positions"] == "absolute":
        return np.broadcast_to(np.arange(ids.shape[1], dtype=np.int64), ids.shape)
    if spec["positions"] == "roberta":
        m = (ids != spec["pad_id"]).astype(np.int64)
        return np.cumsum(m, axis=1) * m + spec["pad_id"]
    return None


def relative_bias(w, seq):
    """[heads, seq, seq] float64: head h's bias for query i and key j."""
    rel = np.arange(seq)[None, :] - np.arange(seq)[:, None]
    return w["rel"].astype(np.float64)[np.clip(rel, -REL_SPAN, REL_SPAN) + REL_SPAN].transpose(2, 0, 1)


def _layer_norm(x, g, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return ((x - mu) / np.sqrt(var + eps)) * g + b


def forward(w, spec, input_ids, attention_mask, token_type_ids=None, positions=None):
    """[batch, seq] integer arrays -> (start_logits, end_logits), float32 [batch, seq].
    `positions` overrides the position ids (the checks use it to show what wrong ones do)."""
    f = lambda a: np.asarray(a, dtype=np.float64)  # noqa: E731
    ids = np.asarray(input_ids, dtype=np.int64)
    mask = np.asarray(attention_mask, dtype=np.float64)
    batch, seq = ids.shape
    if ids.min(initial=0) < 0 or ids.max(initial=0) >= spec["vocab"]:
        raise ValueError("token id outside the vocabulary")
    # Rows gathered, then widened: the values of widening the whole table first.
    x = f(w["word"][ids])
    pos = position_ids(spec, ids) if positions is None else np.asarray(positions, dtype=np.int64)
    if pos is not None:
        if pos.max(initial=0) >= spec["max_positions"]:
            raise ValueError(f"position id beyond {spec['max_positions'] - 1}")
        x = x + f(w["pos"][pos])
    if spec["types"] == "3in":
        seg = np.zeros_like(ids) if token_type_ids is None else np.asarray(token_type_ids, dtype=np.int64)
        x = x + f(w["type"][seg])
    elif spec["types"] == "row0":
        x = x + f(w["type"])[0]
    x = _layer_norm(x, f(w["emb_ln_g"]), f(w["emb_ln_b"]), spec["ln_eps"])
    bias = ((1.0 - mask) * MASK_BIAS)[:, None, None, :]
    if spec["positions"] == "relative":
        bias = bias + relative_bias(w, seq)[None]
    layers = [{k: f(v) for k, v in L.items()} for L in w["layers"]]
    head = (f(w["qa_w"]), f(w["qa_b"]))
    # One sequence at a time: the rows are independent, and one row's attention scores
    # stay in the cache where a batch's do not (the same operations, the same numbers).
    start = np.empty((batch, seq), np.float32)
    end = np.empty((batch, seq), np.float32)
    for i in range(batch):
        start[i], end[i] = _encode_row(layers, head, spec, x[i:i + 1], bias[i:i + 1])
    return start, end


def _encode_row(layers, head, spec, x, bias):
    """The encoder and QA head of forward() on one sequence's embeddings ([1, seq,
    HIDDEN]), with its attention bias ([1, heads or 1, seq or 1, seq]), float64 weights."""
    seq = x.shape[1]
    dh = HIDDEN // HEADS
    scale = 1.0 / np.sqrt(dh)
    for L in layers:
        def heads(t):
            return t.reshape(1, seq, HEADS, dh).transpose(0, 2, 1, 3)
        q = heads(x @ L["wq"] + L["bq"])
        k = heads(x @ L["wk"] + L["bk"])
        v = heads(x @ L["wv"] + L["bv"])
        ctx = (tinybert.attention(q, k, scale, bias) @ v).transpose(0, 2, 1, 3).reshape(1, seq, HIDDEN)
        x = _layer_norm(x + ctx @ L["wo"] + L["bo"], L["ln1_g"], L["ln1_b"], spec["ln_eps"])
        h = x @ L["w1"] + L["b1"]
        h = 0.5 * h * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (h + 0.044715 * h ** 3)))
        x = _layer_norm(x + h @ L["w2"] + L["b2"], L["ln2_g"], L["ln2_b"], spec["ln_eps"])
    logits = x @ head[0] + head[1]
    return logits[0, :, 0].astype(np.float32), logits[0, :, 1].astype(np.float32)


if __name__ == "__main__":
    import sys
    req = json.load(sys.stdin)
    weights, model_spec = make_weights(req["model"])
    s, e = forward(weights, model_spec, req["input_ids"], req["attention_mask"], req.get("token_type_ids"))
    json.dump({"start": s.astype(float).tolist(), "end": e.astype(float).tolist()}, sys.stdout)
