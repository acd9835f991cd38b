"""A small BERT-architecture extractive-QA model in pure numpy, with seeded random
weights. It is NOT a trained model: its answers are meaningless. It exists so that
bertqa's tests exercise a real compute-bound transformer (embeddings, self-attention
with the attention mask, tanh-approximated GELU, layer norm, QA head) whose logits can
be recomputed independently from the same seed.

Used by the python-backend models in ../repo (tiny-bert, tiny-bert-hf) and by the tests,
which import this file to recompute expected logits.

The weights are float32 (the ONNX twin's), but the forward pass runs in float64 and only
its logits are rounded to float32: float32 arithmetic differed between CPUs by up to
1e-5 (numpy's AVX-512 or AVX2 kernels for tanh/exp, OpenBLAS's per-CPU GEMM kernels),
while float64 differences of ~1e-16 practically never change the rounded float32 logit.
So the model gives the same logits on every x86-64 machine, and goldens made from it
on one machine hold on another.
"""
import numpy as np

VOCAB = 30522
HIDDEN = 64
LAYERS = 2
HEADS = 4
INTERMEDIATE = 128
MAX_POSITIONS = 512
TYPE_VOCAB = 2
LN_EPS = 1e-12


def make_weights(seed=20241202):
    """Seeded float32 weights (numpy's PCG64 generator, so they are reproducible)."""
    rng = np.random.default_rng(seed)

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    w = {
        "word": normal(VOCAB, HIDDEN, std=0.5),
        "pos": normal(MAX_POSITIONS, HIDDEN, std=0.5),
        "type": normal(TYPE_VOCAB, HIDDEN, std=0.5),
        "emb_ln_g": np.ones(HIDDEN, np.float32),
        "emb_ln_b": np.zeros(HIDDEN, np.float32),
        "layers": [],
    }
    add_encoder_and_head(w, normal)
    return w


def add_encoder_and_head(w, normal):
    """The encoder layers and the QA head, drawn from `normal` in this order (the seeded
    weights of every test model depend on it)."""
    for _ in range(LAYERS):
        w["layers"].append({
            "wq": normal(HIDDEN, HIDDEN, std=0.2), "bq": normal(HIDDEN),
            "wk": normal(HIDDEN, HIDDEN, std=0.2), "bk": normal(HIDDEN),
            "wv": normal(HIDDEN, HIDDEN, std=0.2), "bv": normal(HIDDEN),
            "wo": normal(HIDDEN, HIDDEN, std=0.2), "bo": normal(HIDDEN),
            "ln1_g": np.ones(HIDDEN, np.float32), "ln1_b": np.zeros(HIDDEN, np.float32),
            "w1": normal(HIDDEN, INTERMEDIATE, std=0.2), "b1": normal(INTERMEDIATE),
            "w2": normal(INTERMEDIATE, HIDDEN, std=0.2), "b2": normal(HIDDEN),
            "ln2_g": np.ones(HIDDEN, np.float32), "ln2_b": np.zeros(HIDDEN, np.float32),
        })
    w["qa_w"] = normal(HIDDEN, 2, std=1.0)
    w["qa_b"] = normal(2)


def _layer_norm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return ((x - mu) / np.sqrt(var + LN_EPS)) * g + b


def _gelu(x):
    # tanh approximation of GELU (the ONNX twin builds the same formula from Tanh).
    c = np.sqrt(2.0 / np.pi)
    return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x ** 3)))


def _float64(w):
    """The weights as float64, made once per weights dict."""
    if "_f64" not in w:
        w["_f64"] = {
            k: ([{n: a.astype(np.float64) for n, a in L.items()} for L in v] if k == "layers"
                else v.astype(np.float64))
            for k, v in w.items() if k != "_f64"
        }
    return w["_f64"]


def forward(w, input_ids, segment_ids, input_mask):
    """[batch, seq] integer arrays -> (start_logits, end_logits), each float32 [batch, seq]."""
    w = _float64(w)
    ids = np.asarray(input_ids, dtype=np.int64)
    seg = np.asarray(segment_ids, dtype=np.int64)
    mask = np.asarray(input_mask, dtype=np.float64)
    batch, seq = ids.shape
    if seq > MAX_POSITIONS:
        raise ValueError(f"sequence length {seq} exceeds {MAX_POSITIONS}")
    if ids.min(initial=0) < 0 or ids.max(initial=0) >= VOCAB:
        raise ValueError("token id outside the vocabulary")
    # One sequence at a time: the rows are independent, and one row's attention scores
    # stay in the cache where a batch's do not (the same operations, the same numbers).
    start = np.empty((batch, seq), np.float32)
    end = np.empty((batch, seq), np.float32)
    for i in range(batch):
        start[i], end[i] = _forward_row(w, ids[i:i + 1], seg[i:i + 1], mask[i:i + 1])
    return start, end


def attention(q, k, scale, bias):
    """Attention probabilities of queries `q` over keys `k` ([1, heads, seq, dh]) with
    the additive `bias`: the softmax computed in place, each step the same elementwise
    operation as `exp(s - max) / sum` written out, without a temporary per step."""
    p = q @ k.transpose(0, 1, 3, 2)
    p *= scale
    p += bias
    p -= p.max(-1, keepdims=True)
    np.exp(p, out=p)
    p /= p.sum(-1, keepdims=True)
    return p


def _forward_row(w, ids, seg, mask):
    """forward() of one sequence ([1, seq] arrays) with float64 weights `w`."""
    seq = ids.shape[1]
    x = w["word"][ids] + w["pos"][np.arange(seq)][None, :, :] + w["type"][seg]
    x = _layer_norm(x, w["emb_ln_g"], w["emb_ln_b"])
    bias = ((1.0 - mask) * -10000.0)[:, None, None, :]
    dh = HIDDEN // HEADS
    scale = 1.0 / np.sqrt(dh)
    for L in w["layers"]:
        def heads(t):
            return t.reshape(1, seq, HEADS, dh).transpose(0, 2, 1, 3)
        q = heads(x @ L["wq"] + L["bq"])
        k = heads(x @ L["wk"] + L["bk"])
        v = heads(x @ L["wv"] + L["bv"])
        ctx = (attention(q, k, scale, bias) @ v).transpose(0, 2, 1, 3).reshape(1, seq, HIDDEN)
        x = _layer_norm(x + ctx @ L["wo"] + L["bo"], L["ln1_g"], L["ln1_b"])
        h = _gelu(x @ L["w1"] + L["b1"])
        x = _layer_norm(x + h @ L["w2"] + L["b2"], L["ln2_g"], L["ln2_b"])
    logits = x @ w["qa_w"] + w["qa_b"]
    return logits[0, :, 0].astype(np.float32), logits[0, :, 1].astype(np.float32)


if __name__ == "__main__":
    # Used by the Rust tests: reads {"input_ids", "segment_ids", "input_mask", "seed"} as
    # JSON on stdin, prints {"start": [[...]], "end": [[...]]} with exact float32 values.
    import json
    import sys
    req = json.load(sys.stdin)
    s, e = forward(make_weights(req.get("seed", 20241202)), req["input_ids"],
                   req["segment_ids"], req["input_mask"])
    json.dump({"start": s.astype(float).tolist(), "end": e.astype(float).tolist()}, sys.stdout)
