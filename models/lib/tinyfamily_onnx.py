"""Writes one of tinyfamily.py's models as an ONNX graph, built op by op with the `onnx`
package (as tinybert_onnx.py does for tiny-bert).

The graph computes in float64, as the numpy twin does: the weights are stored as
float32 and cast once, and only the logits are cast to float32, so that onnxruntime's
per-CPU kernels differ by float64 noise that practically never changes a float32 logit.
Hugging Face names: inputs `input_ids`, `attention_mask` (and `token_type_ids` for
tiny-bert-3in), INT64 [batch, sequence]; outputs `start_logits`, `end_logits`, FP32
[batch, sequence]; batch and sequence dynamic.

usage: python tinyfamily_onnx.py MODEL OUT.onnx   (MODEL: a name of tinyfamily.SPECS)
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tinyfamily as tf  # noqa: E402


class Graph:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, name, array):
        """A float32 weight as a float64 tensor (exact: every float32 is a float64)."""
        return self.op("Cast", [self.const(name, np.asarray(array, np.float32))], to=TensorProto.DOUBLE)

    def op(self, op_type, inputs, **attrs):
        self.n += 1
        out = f"{op_type.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out


def build(name):
    w, spec = tf.make_weights(name)
    g = Graph()
    H, heads = tf.HIDDEN, tf.HEADS
    dh = H // heads
    f64 = lambda x: np.asarray(x, dtype=np.float64)  # noqa: E731
    i64 = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731

    def layer_norm(x, gamma, beta, prefix):
        # Spelled out (mean, variance, normalise) rather than LayerNormalization, whose
        # float64 kernel onnxruntime does not promise everywhere.
        mu = g.op("ReduceMean", [x], axes=[-1], keepdims=1)
        d = g.op("Sub", [x, mu])
        var = g.op("ReduceMean", [g.op("Mul", [d, d])], axes=[-1], keepdims=1)
        std = g.op("Sqrt", [g.op("Add", [var, g.const(prefix + "_eps", f64(spec["ln_eps"]))])])
        return g.op("Add", [g.op("Mul", [g.op("Div", [d, std]), g.weight(prefix + "_g", gamma)]),
                            g.weight(prefix + "_b", beta)])

    def linear(x, wt, b, prefix):
        return g.op("Add", [g.op("MatMul", [x, g.weight(prefix + "_w", wt)]), g.weight(prefix + "_b", b)])

    # Embeddings: word, then position (absolute or RoBERTa's), then token type.
    x = g.op("Gather", [g.weight("word", w["word"]), "input_ids"], axis=0)
    seq = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const("one_i", i64(1))], axis=0)
    arange = g.op("Range", [g.const("zero_i", i64(0)), seq, g.const("step_i", i64(1))])
    if spec["positions"] == "absolute":
        x = g.op("Add", [x, g.op("Gather", [g.weight("pos", w["pos"]), arange], axis=0)])
    elif spec["positions"] == "roberta":
        # transformers' create_position_ids_from_input_ids: m = ids != pad;
        # cumsum(m) * m + pad.
        pad = g.const("pad_i", i64(spec["pad_id"]))
        m = g.op("Cast", [g.op("Not", [g.op("Equal", ["input_ids", pad])])], to=TensorProto.INT64)
        pos_ids = g.op("Add", [g.op("Mul", [g.op("CumSum", [m, g.const("seq_axis", i64(1))]), m]), pad])
        x = g.op("Add", [x, g.op("Gather", [g.weight("pos", w["pos"]), pos_ids], axis=0)])
    if spec["types"] == "3in":
        x = g.op("Add", [x, g.op("Gather", [g.weight("type", w["type"]), "token_type_ids"], axis=0)])
    elif spec["types"] == "row0":
        x = g.op("Add", [x, g.weight("type0", w["type"][0])])
    x = layer_norm(x, w["emb_ln_g"], w["emb_ln_b"], "emb_ln")

    # Additive attention bias [batch, 1, 1, seq]: 0 for tokens, MASK_BIAS for padding;
    # plus, for relative positions, [1, heads, seq, seq] from the clipped distance j - i.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.DOUBLE)
    bias = g.op("Mul", [g.op("Sub", [g.const("one_f", f64(1.0)), mask]), g.const("neg", f64(tf.MASK_BIAS))])
    bias = g.op("Unsqueeze", [bias, g.const("axes_12", i64([1, 2]))])
    if spec["positions"] == "relative":
        rel = g.op("Sub", [g.op("Unsqueeze", [arange, g.const("axes_0", i64([0]))]),
                           g.op("Unsqueeze", [arange, g.const("axes_1", i64([1]))])])
        rel = g.op("Clip", [rel, g.const("rel_lo", i64(-tf.REL_SPAN)), g.const("rel_hi", i64(tf.REL_SPAN))])
        rel = g.op("Add", [rel, g.const("rel_shift", i64(tf.REL_SPAN))])
        table = g.op("Gather", [g.weight("rel", w["rel"]), rel], axis=0)  # [seq, seq, heads]
        table = g.op("Unsqueeze", [g.op("Transpose", [table], perm=[2, 0, 1]), g.const("axes_0b", i64([0]))])
        bias = g.op("Add", [bias, table])
    split_heads = g.const("split_heads", i64([0, 0, heads, dh]))
    merge_heads = g.const("merge_heads", i64([0, 0, H]))
    scale = g.const("scale", f64(1.0 / np.sqrt(dh)))

    for i, L in enumerate(w["layers"]):
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
        inner = g.op("Mul", [g.const(p + "c", f64(np.sqrt(2.0 / np.pi))),
                             g.op("Add", [h, g.op("Mul", [g.const(p + "k", f64(0.044715)), cube])])])
        gelu = g.op("Mul", [g.op("Mul", [g.const(p + "half", f64(0.5)), h]),
                            g.op("Add", [g.const(p + "one", f64(1.0)), g.op("Tanh", [inner])])])
        x = layer_norm(g.op("Add", [x, linear(gelu, L["w2"], L["b2"], p + "ff2")]), L["ln2_g"], L["ln2_b"], p + "ln2")

    logits = g.op("Cast", [linear(x, w["qa_w"], w["qa_b"], "qa")], to=TensorProto.FLOAT)
    g.nodes.append(helper.make_node("Split", [logits, g.const("split", i64([1, 1]))], ["start3", "end3"], axis=2))
    last = g.const("last_axis", i64([2]))
    g.nodes.append(helper.make_node("Squeeze", ["start3", last], ["start_logits"]))
    g.nodes.append(helper.make_node("Squeeze", ["end3", last], ["end_logits"]))

    dims = ["batch", "sequence"]
    ins = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in tf.inputs(name)]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, dims) for n in ("start_logits", "end_logits")]
    graph = helper.make_graph(g.nodes, name.replace("-", "_"), ins, outs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="bertqa tinyfamily_onnx.py")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=sorted(tf.SPECS))
    ap.add_argument("out")
    a = ap.parse_args()
    model = build(a.model)
    tmp = a.out + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, a.out)
