"""Start/end logits of bertqa's test models, whatever serves them: Triton's python
backend (qa_model.py) and the Open Inference Protocol servers of models/oip (MLServer,
KServe's model server), so that one model answers the same on every stack.

Kinds: `null` (all-zero logits), `tiny-bert` (tinybert.py's seeded numpy BERT, parameter
`seed`), `onnx` (an ONNX file run by onnxruntime, parameter `onnx_file` relative to the
model directory; fed the inputs the graph declares), `oracle` (oracle.py: peaks on gold
answers; parameters `datasets` and `vocab`, relative to the project root, plus
$BERTQA_ORACLE_DATA and $BERTQA_ORACLE_VOCAB; `lose_share` and `lose_seed` make a lossy
oracle, wrong on that share of the questions; `lose_question_word` one wrong on the
questions of that question word) and `tokenizer-oracle`
(tokenizer_oracle.py: the same for windows of any tokenizer.json; parameters `tokenizer`,
a folder holding one, and `datasets`, relative to the project root, plus
$BERTQA_ORACLE_DATA).

Segment ids may be None (a model without that input): they are zeros where a kind
needs them.
"""
import os

import numpy as np

import tinybert

KINDS = ("null", "tiny-bert", "onnx", "oracle", "tokenizer-oracle")


class Logits:
    """`Logits(kind, params, root, model_dir)(ids, seg, mask)` -> (start, end), each
    float32 [batch, seq], for [batch, seq] integer arrays. Raises ValueError for an
    unknown kind."""

    def __init__(self, kind, params, root, model_dir):
        self.kind = kind
        self.weights = None
        self.oracle = None
        self.session = None
        if kind == "tiny-bert":
            self.weights = tinybert.make_weights(int(params.get("seed", "20241202")))
        elif kind == "onnx":
            import onnxruntime
            path = os.path.join(model_dir, params["onnx_file"])
            opts = onnxruntime.SessionOptions()
            opts.intra_op_num_threads = 1
            opts.inter_op_num_threads = 1
            self.session = onnxruntime.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            self.feeds = [i.name for i in self.session.get_inputs()]
        elif kind == "oracle":
            import oracle
            files = oracle.squad_files(params.get("datasets", ""), root)
            files += oracle.squad_files(os.environ.get("BERTQA_ORACLE_DATA", ""), os.getcwd())
            vocab = os.environ.get("BERTQA_ORACLE_VOCAB") or os.path.join(root, params.get("vocab", "vocab/vocab.txt"))
            self.oracle = oracle.Oracle(vocab, files, lose_share=float(params.get("lose_share", "0")),
                                        lose_seed=int(params.get("lose_seed", "0")),
                                        lose_question_word=params.get("lose_question_word", ""))
        elif kind == "tokenizer-oracle":
            import oracle
            import tokenizer_oracle
            files = oracle.squad_files(params.get("datasets", ""), root)
            files += oracle.squad_files(os.environ.get("BERTQA_ORACLE_DATA", ""), os.getcwd())
            if not params.get("tokenizer"):
                raise ValueError("kind tokenizer-oracle needs the parameter `tokenizer` (a folder)")
            self.oracle = tokenizer_oracle.TokenizerOracle(os.path.join(root, params["tokenizer"]), files)
        elif kind != "null":
            raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")

    def __call__(self, ids, seg, mask):
        if seg is None:
            seg = np.zeros_like(ids)
        if self.session is not None:
            given = {"input_ids": ids, "attention_mask": mask, "token_type_ids": seg}
            feeds = {n: given[n].astype(np.int64) for n in self.feeds}
            start, end = self.session.run(["start_logits", "end_logits"], feeds)
            return start, end
        if self.oracle is not None:
            if not len(ids):  # no windows (max_batch_size 0 models may get none)
                z = np.zeros(ids.shape, np.float32)
                return z, z
            pairs = [self.oracle.logits(i, m) for i, m in zip(ids, mask)]
            return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])
        if self.weights is None:
            z = np.zeros(ids.shape, np.float32)
            return z, z
        return tinybert.forward(self.weights, ids, seg, mask)
