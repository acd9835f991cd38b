"""The oracle for windows of any fast tokenizer (tokenizer.json): logits that peak on the
gold answer, as oracle.py's do for run_squad's WordPiece features.

NOT a QA model. It validates a client's pipeline for the BERT family's other QA models
(run_qa's rules: the tokenizer's own pair template, truncation of the context only,
padding with the tokenizer's pad id, offsets): a correct client scores 100 EM on any
SQuAD file it loaded, and every lost point is a pipeline defect or a gold answer that no
span of whole tokens spells.

Independence: it tokenizes with the `tokenizers` Python package (the Triton venv's),
loading the tokenizer.json the client uses, never with bertqa's code.

Set-up, per question of the SQuAD files: the pair (question.lstrip(), context) is
encoded without truncation, as the tokenizer encodes it; the question's key is its ids
between the first token (the template's first special token) and the first separator;
the context's tokens (sequence id 1) keep their ids and character offsets; each gold
answer [answer_start, answer_start + len(text)) becomes the tokens whose offsets
overlap it (so a SentencePiece answer starts on the piece whose offsets include the
space before the word).

A window (the ids up to its attention mask's length):
1. its key is the ids between position 0 and the first separator; a question of that
   key whose context tokens contain the window's context part (from where the
   question's context starts in the pair to the template's trailing special tokens)
   is the window's question;
2. an unanswerable question peaks start and end on position 0; an answerable one on
   the first and last token of its first gold answer that lies wholly in the window
   (start = end = PEAK there); a window without one gets noise alone;
3. everything else is oracle.py's background noise, in [-1, 0) from a hash of the
   window's ids, so the result does not depend on batching or padding.
"""
import json
import os

import numpy as np
from tokenizers import Tokenizer

from oracle import PEAK, background


class Question:
    """One question of the files, as the tokenizer encodes it in a pair."""

    def __init__(self, ctx_start, ctx_ids, trailing, spans):
        self.ctx_start = ctx_start  # where its context starts in a window
        self.ctx_ids = ctx_ids  # the whole context's ids
        self.trailing = trailing  # special tokens after the context (the template's)
        self.spans = spans  # gold answers as (first, last) context token; None: unanswerable

    def find(self, part):
        """Where the ids `part` start in the context, or None."""
        n, ids = len(part), self.ctx_ids
        first = part[0]
        for k in range(len(ids) - n + 1):
            if ids[k] == first and ids[k:k + n] == part:
                return k
        return None


class TokenizerOracle:
    def __init__(self, folder, files):
        self.tok = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
        self.tok.no_truncation()
        self.tok.no_padding()
        with open(os.path.join(folder, "special_tokens_map.json"), encoding="utf-8") as f:
            specials = json.load(f)

        def content(t):
            return t["content"] if isinstance(t, dict) else t
        self.sep = self.tok.token_to_id(content(specials["sep_token"]))
        if self.sep is None:
            raise ValueError(f"{folder}: no id for the separator {specials['sep_token']!r}")
        self.questions = {}  # key (tuple of ids) -> [Question]
        for path in files:
            try:
                with open(path, encoding="utf-8") as f:
                    articles = json.load(f)["data"]
            except (ValueError, KeyError, TypeError):
                continue  # not a SQuAD file
            for article in articles:
                for para in article.get("paragraphs", []):
                    for qa in para.get("qas", []):
                        self._add(qa, para.get("context", ""))

    def _add(self, qa, context):
        enc = self.tok.encode(qa.get("question", "").lstrip(), context)
        ids, seq = enc.ids, enc.sequence_ids
        ctx = [i for i, s in enumerate(seq) if s == 1]
        if not ctx or self.sep not in ids[1:]:
            return  # no context tokens: no window can hold an answer
        key = tuple(ids[1:ids.index(self.sep, 1)])
        lo, hi = ctx[0], ctx[-1] + 1
        offsets = enc.offsets[lo:hi]
        spans = None
        answers = [a for a in qa.get("answers", []) if a.get("text", "").strip()]
        if not qa.get("is_impossible", False) and answers:
            spans = []
            for a in answers:
                a0 = int(a["answer_start"])
                a1 = a0 + len(a["text"])
                hit = [i for i, (s, e) in enumerate(offsets) if e > s and s < a1 and e > a0]
                if hit and (hit[0], hit[-1]) not in spans:
                    spans.append((hit[0], hit[-1]))
        self.questions.setdefault(key, []).append(Question(lo, list(ids[lo:hi]), len(ids) - hi, spans))

    def logits(self, ids, mask):
        """ids, mask: 1-D int arrays of one window -> (start, end) float32."""
        length = int(np.sum(mask != 0))
        row = [int(x) for x in ids[:length]]
        start, end = background(row, len(ids))
        try:
            first_sep = row.index(self.sep, 1)
        except ValueError:
            return start, end
        for q in self.questions.get(tuple(row[1:first_sep]), []):
            lo, hi = q.ctx_start, length - q.trailing
            if hi <= lo:
                continue
            k = q.find(row[lo:hi])
            if k is None:
                continue
            if q.spans is None:
                start[0] = end[0] = PEAK
                return start, end
            for s, e in q.spans:
                if k <= s and e < k + (hi - lo):
                    start[lo + s - k] = PEAK
                    end[lo + e - k] = PEAK
                    return start, end
            return start, end
        return start, end
