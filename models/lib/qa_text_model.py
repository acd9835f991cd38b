"""The python-backend models of bertqa's text ensembles (question and context as BYTES).

Each `repo/<name>/1/model.py` imports `TritonPythonModel` from here; parameter `role`
picks what the model does (all but `answer` `max_batch_size: 0`, one question per
request):

- `tokenizer`: inputs `question`, `context` BYTES [1] -> `input_ids`, `segment_ids`,
  `input_mask` INT64 [windows, 384], `offsets` INT32 [windows, 384, 2] and
  `piece_index` INT32 [windows, 384] (qa_text.py: the windows of `bertqa features`,
  offsets in code points of the context, [-1, -1] outside it; each token's index among
  the context's pieces, -1 outside it); parameter `doc_stride` (default 128).
- `postprocess`: inputs `context` BYTES [1], `start_logits`, `end_logits` FP32
  [windows, 384], `offsets` INT32 [windows, 384, 2], `piece_index` INT32 [windows, 384]
  -> `answer` BYTES [1], `score`,
  `no_answer_score` FP32 [1], `answer_start`, `answer_end` INT32 [1] (best_span below;
  with no valid span, run_squad's placeholder answer "empty" at [0, 0), score 0).
- `answer`: the answer contract in one BLS model that batches (`max_batch_size` > 0):
  inputs `question`, `context` BYTES [batch, 1]; for each row the tokenizer's windows,
  one BLS request to the BERT named by parameter `bert` (all of the row's windows), and
  the postprocess's answer; outputs as the postprocess's, [batch, 1] each.
- `fault`: the answer contract answered wrongly on purpose, parameter `fault`:
  `non-utf8-answer` (the answer's bytes are not UTF-8), `missing-output` (no `answer`),
  `wrong-count` (two answer elements for one question). Its answer is the context's
  first word, with its character positions and scores of 0: only the fault matters.
"""
import json
import os
import re
import sys

import numpy as np
import triton_python_backend_utils as pb_utils

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qa_text  # noqa: E402

N_BEST = 20  # run_squad's n_best_size: the starts and ends considered per window
MAX_ANSWER_LENGTH = 30  # pieces, run_squad's max_answer_length
FAULTS = ("non-utf8-answer", "missing-output", "wrong-count")
READER_SPACE = re.compile("[ \t\r\n\u202f]+")  # run_squad's whitespace


def best_span(start, end, offsets, pieces, n_best=N_BEST, max_answer_length=MAX_ANSWER_LENGTH):
    """run_squad's choice of the best span over all windows, on the offsets instead of
    its maps: for each window the n_best highest start and end positions (all positions
    ranked, stable), kept when both are context tokens (offsets >= 0), end >= start,
    at most max_answer_length pieces, and the start's window is the one where that
    piece has the most context (algorithm.md §4.6, from `pieces`: each token's index
    among the context's pieces). Returns (window, start, end, score) of the highest
    start + end logit (the first on ties), or None; and the no-answer score: the
    smallest [CLS] start + end logit over the windows (run_squad's score_null), 0
    without windows."""
    windows = start.shape[0]
    null = min((float(start[w, 0]) + float(end[w, 0]) for w in range(windows)), default=0.0)
    owner = _max_context(pieces)
    best = None
    for w in range(windows):
        starts = np.argsort(-start[w], kind="stable")[:n_best]
        ends = np.argsort(-end[w], kind="stable")[:n_best]
        for s in starts:
            if offsets[w, s, 0] < 0 or owner[int(pieces[w, s])] != w:
                continue
            for e in ends:
                if offsets[w, e, 0] < 0 or e < s or e - s + 1 > max_answer_length:
                    continue
                score = float(start[w, s]) + float(end[w, e])
                if best is None or score > best[3]:
                    best = (w, int(s), int(e), score)
    return best, null


def _max_context(pieces):
    """{piece: the window where it has the most context}: the score is the distance to
    the nearer edge of the window plus 0.01 * the window's length in pieces; the first
    window wins ties (algorithm.md §4.6)."""
    best = {}  # piece -> (score, window)
    for w in range(pieces.shape[0]):
        row = pieces[w][pieces[w] >= 0]
        if not len(row):
            continue
        lo, hi, n = int(row[0]), int(row[-1]), len(row)
        for p in range(lo, hi + 1):
            score = min(p - lo, hi - p) + 0.01 * n
            if p not in best or score > best[p][0]:
                best[p] = (score, w)
    return {p: w for p, (_, w) in best.items()}


def _text(tensor):
    """The one element of a BYTES [1] input, as str."""
    return tensor.as_numpy().reshape(-1)[0].decode("utf-8")


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        params = {k: v["string_value"] for k, v in cfg.get("parameters", {}).items()}
        self.role = params.get("role", "")
        self.fault = params.get("fault", "")
        if self.role in ("tokenizer", "answer"):
            root = os.path.abspath(os.path.join(args["model_repository"], "..", "..", ".."))
            vocab = os.path.join(root, params.get("vocab", "vocab/vocab.txt"))
            self.features = qa_text.TextFeatures(vocab, doc_stride=int(params.get("doc_stride", "128")))
            self.bert = params.get("bert", "")
        elif self.role == "fault":
            if self.fault not in FAULTS:
                raise pb_utils.TritonModelException(f"unknown fault {self.fault!r} (one of {', '.join(FAULTS)})")
        elif self.role != "postprocess":
            raise pb_utils.TritonModelException(
                f"unknown role {self.role!r} (tokenizer, postprocess, answer, fault)")

    def execute(self, requests):
        out = []
        for req in requests:
            try:
                out.append(pb_utils.InferenceResponse(getattr(self, "_" + self.role)(req)))
            except UnicodeDecodeError as e:
                out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(
                    f"question or context is not UTF-8: {e}", pb_utils.TritonError.INVALID_ARG)))
        return out

    def _tokenizer(self, req):
        question = _text(pb_utils.get_input_tensor_by_name(req, "question"))
        context = _text(pb_utils.get_input_tensor_by_name(req, "context"))
        ids, seg, mask, offsets, pieces = self.features(question, context)
        return [pb_utils.Tensor("input_ids", ids), pb_utils.Tensor("segment_ids", seg),
                pb_utils.Tensor("input_mask", mask), pb_utils.Tensor("offsets", offsets),
                pb_utils.Tensor("piece_index", pieces)]

    def _postprocess(self, req):
        context = _text(pb_utils.get_input_tensor_by_name(req, "context"))
        start = pb_utils.get_input_tensor_by_name(req, "start_logits").as_numpy()
        end = pb_utils.get_input_tensor_by_name(req, "end_logits").as_numpy()
        offsets = pb_utils.get_input_tensor_by_name(req, "offsets").as_numpy()
        pieces = pb_utils.get_input_tensor_by_name(req, "piece_index").as_numpy()
        return _answer_tensors(*_answer_of(context, start, end, offsets, pieces))

    def _answer(self, req):
        questions = pb_utils.get_input_tensor_by_name(req, "question").as_numpy().reshape(-1)
        contexts = pb_utils.get_input_tensor_by_name(req, "context").as_numpy().reshape(-1)
        rows = []
        for q, c in zip(questions, contexts):
            context = c.decode("utf-8")
            ids, seg, mask, offsets, pieces = self.features(q.decode("utf-8"), context)
            bert = pb_utils.InferenceRequest(
                model_name=self.bert, requested_output_names=["output__0", "output__1"],
                inputs=[pb_utils.Tensor("input__0", ids), pb_utils.Tensor("input__1", seg),
                        pb_utils.Tensor("input__2", mask)]).exec()
            if bert.has_error():
                raise pb_utils.TritonModelException(f"{self.bert}: {bert.error().message()}")
            start = pb_utils.get_output_tensor_by_name(bert, "output__0").as_numpy()
            end = pb_utils.get_output_tensor_by_name(bert, "output__1").as_numpy()
            rows.append(_answer_of(context, start, end, offsets, pieces))
        column = lambda i, dtype: np.array([[r[i]] for r in rows], dtype=dtype)  # noqa: E731
        return [pb_utils.Tensor("answer", column(0, np.object_)),
                pb_utils.Tensor("score", column(1, np.float32)),
                pb_utils.Tensor("no_answer_score", column(2, np.float32)),
                pb_utils.Tensor("answer_start", column(3, np.int32)),
                pb_utils.Tensor("answer_end", column(4, np.int32))]

    def _fault(self, req):
        context = _text(pb_utils.get_input_tensor_by_name(req, "context"))
        words = qa_text._words(context)
        lo, word = words[0] if words else (0, "")
        answer = word.encode("utf-8")
        tensors = _answer_tensors(answer, 0.0, 0.0, lo, lo + len(word))
        if self.fault == "non-utf8-answer":
            # 0xFF never occurs in UTF-8; a lone continuation byte (0x80) neither.
            tensors[0] = pb_utils.Tensor("answer", np.array([b"\xff" + answer + b"\x80"], dtype=np.object_))
        elif self.fault == "missing-output":
            tensors = tensors[1:]
        elif self.fault == "wrong-count":
            tensors[0] = pb_utils.Tensor("answer", np.array([answer, answer], dtype=np.object_))
        return tensors


def _answer_of(context, start, end, offsets, pieces):
    """The postprocess's answer: (UTF-8 text, score, no-answer score, start, end). The
    text is run_squad's: the context's words joined by one space (its reader's
    whitespace, algorithm.md §2.1), cut at the span's first and last characters."""
    best, null = best_span(start, end, offsets, pieces)
    if best is None:  # no valid span: run_squad's placeholder "empty", logits 0 + 0
        return b"empty", 0.0, null, 0, 0
    w, s, e, score = best
    lo, hi = int(offsets[w, s, 0]), int(offsets[w, e, 1])
    return " ".join(READER_SPACE.split(context[lo:hi])).encode("utf-8"), score, null, lo, hi


def _answer_tensors(answer, score, null, lo, hi):
    return [pb_utils.Tensor("answer", np.array([answer], dtype=np.object_)),
            pb_utils.Tensor("score", np.array([score], np.float32)),
            pb_utils.Tensor("no_answer_score", np.array([null], np.float32)),
            pb_utils.Tensor("answer_start", np.array([lo], np.int32)),
            pb_utils.Tensor("answer_end", np.array([hi], np.int32))]
