"""Writes tinybert.py's model as an ONNX graph, built op by op with the `onnx` package.

The graph is the same architecture with the same seeded weights (embeddings, masked
self-attention, tanh-approximated GELU, layer norm, QA head), so onnxruntime and the
numpy twin differ only by floating-point noise. Batch and sequence dimensions are
dynamic. Hugging Face export convention: inputs `input_ids`, `attention_mask`,
`token_type_ids` (INT64, [batch, seq]) -> outputs `start_logits`, `end_logits`
(FP32, [batch, seq]).

usage: python tinybert_onnx.py OUT.onnx [--seed N]
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinybert  # noqa: E402


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type, inputs, **attrs):
        self.n += 1
        out = f"{op_type.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out


def build(weights):
    g = Graph()
    H, heads = tinybert.HIDDEN, tinybert.HEADS
    dh = H // heads
    f32 = lambda x: np.asarray(x, dtype=np.float32)  # noqa: E731

    def layer_norm(x, gamma, beta, prefix):
        return g.op("LayerNormalization", [x, g.const(prefix + "_g", gamma), g.const(prefix + "_b", beta)],
                    axis=-1, epsilon=tinybert.LN_EPS)

    def linear(x, w, b, prefix):
        return g.op("Add", [g.op("MatMul", [x, g.const(prefix + "_w", w)]), g.const(prefix + "_b", b)])

    # Embeddings.
    word = g.op("Gather", [g.const("word", weights["word"]), "input_ids"], axis=0)
    types = g.op("Gather", [g.const("type", weights["type"]), "token_type_ids"], axis=0)
    seq = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const("one_i", np.array(1, np.int64))], axis=0)
    positions = g.op("Range", [g.const("zero_i", np.array(0, np.int64)), seq, g.const("step_i", np.array(1, np.int64))])
    pos = g.op("Gather", [g.const("pos", weights["pos"]), positions], axis=0)
    x = g.op("Add", [g.op("Add", [word, pos]), types])
    x = layer_norm(x, weights["emb_ln_g"], weights["emb_ln_b"], "emb_ln")

    # Additive attention mask [batch, 1, 1, seq]: 0 for tokens, -10000 for padding.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    bias = g.op("Mul", [g.op("Sub", [g.const("one_f", f32(1.0)), mask]), g.const("neg", f32(-10000.0))])
    bias = g.op("Unsqueeze", [bias, g.const("axes_12", np.array([1, 2], np.int64))])
    split_heads = g.const("split_heads", np.array([0, 0, heads, dh], np.int64))
    merge_heads = g.const("merge_heads", np.array([0, 0, H], np.int64))
    scale = g.const("scale", f32(1.0 / np.sqrt(dh)))

    for i, L in enumerate(weights["layers"]):
        p = f"l{i}"

        def heads_of(t, perm):
            return g.op("Transpose", [g.op("Reshape", [t, split_heads])], perm=perm)

        q = heads_of(linear(x, L["wq"], L["bq"], p + "q"), [0, 2, 1, 3])
        k = heads_of(linear(x, L["wk"], L["bk"], p + "k"), [0, 2, 3, 1])
        v = heads_of(linear(x, L["wv"], L["bv"], p + "v"), [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merge_heads])
        x = layer_norm(g.op("Add", [x, linear(ctx, L["wo"], L["bo"], p + "o")]), L["ln1_g"], L["ln1_b"], p + "ln1")
        h = linear(x, L["w1"], L["b1"], p + "ff1")
        # GELU, tanh approximation: 0.5 h (1 + tanh(sqrt(2/pi) (h + 0.044715 h^3)))
        cube = g.op("Mul", [g.op("Mul", [h, h]), h])
        inner = g.op("Mul", [g.const(p + "c", f32(np.sqrt(2.0 / np.pi))),
                             g.op("Add", [h, g.op("Mul", [g.const(p + "k", f32(0.044715)), cube])])])
        gelu = g.op("Mul", [g.op("Mul", [g.const(p + "half", f32(0.5)), h]),
                            g.op("Add", [g.const(p + "one", f32(1.0)), g.op("Tanh", [inner])])])
        x = layer_norm(g.op("Add", [x, linear(gelu, L["w2"], L["b2"], p + "ff2")]), L["ln2_g"], L["ln2_b"], p + "ln2")

    logits = linear(x, weights["qa_w"], weights["qa_b"], "qa")
    g.nodes.append(helper.make_node("Split", [logits, g.const("split", np.array([1, 1], np.int64))],
                                    ["start3", "end3"], axis=2))
    last = g.const("last_axis", np.array([2], np.int64))
    g.nodes.append(helper.make_node("Squeeze", ["start3", last], ["start_logits"]))
    g.nodes.append(helper.make_node("Squeeze", ["end3", last], ["end_logits"]))

    dims = ["batch", "sequence"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims)
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("start_logits", "end_logits")]
    graph = helper.make_graph(g.nodes, "tiny_bert_qa", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="bertqa tinybert_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=20241202)
    a = ap.parse_args()
    model = build(tinybert.make_weights(a.seed))
    tmp = a.out + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, a.out)
