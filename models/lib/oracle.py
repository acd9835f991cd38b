"""The oracle test model: logits that peak on the gold answer.

NOT a QA model. It validates a client's pipeline: given the features a client sends, it
recognises each window's question and peaks the start/end logits on a gold answer, so a
correct client (windows, segment ids, padding, unique-id bookkeeping, span decoding,
final-text recovery, scoring) scores near 100 EM on any SQuAD file, and every lost
point is a pipeline defect or a gold answer that is not a whole sequence of word pieces.

Independence: it tokenizes with transformers' slow `BertTokenizer` (4.46.3), never with
bertqa's tokenizer.

How a window is answered:
1. The question is recognised by its token ids between [CLS] and the first [SEP] (the
   64-piece prefix clients keep). Questions that share that prefix have their gold
   answers merged.
2. For an answerable question, the first gold answer whose piece sequence occurs in the
   window's context part (between the first and the last [SEP]) gets start = end =
   PEAK at its first and last piece. An unanswerable question peaks on [CLS] (position 0).
3. Everything else is deterministic background noise in [-1, 0) from a hash of the
   window's ids, so the result does not depend on batching.

A lossy oracle (`lose_share` > 0, default 0: the plain oracle) answers a deterministic
share of the questions wrongly, for tests of statistics over per-question scores
(`compare`'s bootstrap, McNemar and sign-flip tests): a question is lost when the first
8 bytes (little-endian) of the sha256 of the int64 array [`lose_seed`, its key ids...],
read as a fraction in [0, 1), are below `lose_share`, a choice that depends on the
question alone (every window and every batch agree; another seed loses other
questions). In a lost question's windows, answerable or not, start = end = PEAK on one
whole word of the context part that shares no word piece with any of the question's
gold answers and is not an article or punctuation (so its text is never a gold answer,
F1 0, and never empty after SQuAD normalization); which word comes from the same hash.
A window without such a word peaks on [CLS] (a wrong "no answer" for an answerable
question; an unanswerable one then stays right).

An oracle wrong on one kind of question (`lose_question_word`, e.g. `when`) loses, the
same way, exactly the questions whose first question word (the first of what, which,
who, whom, whose, when, where, why, how among its word pieces, decided from the token
ids) is that word: a model whose errors gather in one slice (docs/algorithm.md, Slices).

Data: every SQuAD JSON file under the directories/files listed in the `datasets` config
parameter (paths relative to the project root, `:`-separated), plus those in
the environment variable BERTQA_ORACLE_DATA (same syntax, absolute or relative to the
current directory), are loaded at start-up.
"""
import glob
import hashlib
import json
import os

import numpy as np

PEAK = 10.0
CLS, SEP = 101, 102
ARTICLES = ("a", "an", "the")  # removed by SQuAD's answer normalization


def squad_files(spec, base):
    out = []
    for part in filter(None, spec.split(":")):
        p = part if os.path.isabs(part) else os.path.join(base, part)
        if os.path.isdir(p):
            out.extend(sorted(glob.glob(os.path.join(p, "**", "*.json"), recursive=True)))
        elif os.path.isfile(p):
            out.append(p)
    return out


def background(row, seq):
    """The noise of a window: start and end logits in [-1, 0), float32 [seq], seeded by
    a hash of the window's ids up to its length (`row`), so that a window gets the same
    logits whatever it is batched with and however much padding follows."""
    digest = hashlib.sha256(np.asarray(row, dtype=np.int64).tobytes()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    return -rng.random(seq).astype(np.float32), -rng.random(seq).astype(np.float32)


class Oracle:
    def __init__(self, vocab_path, files, lower_case=True, max_query_length=64,
                 lose_share=0.0, lose_seed=0, lose_question_word=""):
        from transformers import BertTokenizer
        self.tok = BertTokenizer(vocab_path, do_lower_case=lower_case)
        self.max_query_length = max_query_length
        self.lose_share = float(lose_share)
        self.lose_seed = int(lose_seed)
        self.lose_question_word = lose_question_word
        words = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")
        self.question_words = {self.tok.vocab[w]: w for w in words if w in self.tok.vocab}
        # question prefix (tuple of ids) -> list of answers (tuple of ids); [] = impossible
        self.answers = {}
        self.impossible = set()
        for path in files:
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
                articles = data["data"]
            except (ValueError, KeyError, TypeError):
                continue  # not a SQuAD file
            for article in articles:
                for para in article.get("paragraphs", []):
                    for qa in para.get("qas", []):
                        self._add(qa)

    def _ids(self, text):
        return tuple(self.tok.convert_tokens_to_ids(self.tok.tokenize(text)))

    def _add(self, qa):
        key = self._ids(qa.get("question", ""))[: self.max_query_length]
        golds = [self._ids(a["text"]) for a in qa.get("answers", []) if a.get("text", "").strip()]
        if qa.get("is_impossible", False) or not golds:
            self.impossible.add(key)
            self.answers.setdefault(key, [])
            return
        lst = self.answers.setdefault(key, [])
        for g in golds:
            if g and g not in lst:
                lst.append(g)

    def loss_hash(self, key):
        """The lossy oracle's hash of a question (its key ids) and its seed, as an int."""
        blob = np.asarray((self.lose_seed,) + tuple(key), dtype=np.int64).tobytes()
        return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little")

    def loses(self, key):
        """Whether the question of these key ids is one the lossy oracle answers wrongly."""
        if self.lose_question_word:
            first = next((self.question_words[i] for i in key if i in self.question_words), None)
            return first == self.lose_question_word
        return self.lose_share > 0 and self.loss_hash(key) / 2.0 ** 64 < self.lose_share

    def wrong_word(self, row, ctx_lo, ctx_hi, golds, key):
        """(first, last) piece of a whole word of the context part [ctx_lo, ctx_hi) of a
        window that shares no piece with the gold answers `golds` and is neither an
        article nor punctuation, chosen by the question's loss hash; None if none."""
        gold_pieces = {p for g in golds for p in g}
        tokens = self.tok.convert_ids_to_tokens(row[ctx_lo:ctx_hi])
        words, s = [], 0
        while s < len(tokens):
            e = s
            while e + 1 < len(tokens) and tokens[e + 1].startswith("##"):
                e += 1
            pieces = row[ctx_lo + s:ctx_lo + e + 1]
            if (tokens[s].isalnum() and tokens[s] not in ARTICLES
                    and not any(p in gold_pieces for p in pieces)):
                words.append((ctx_lo + s, ctx_lo + e))
            s = e + 1
        if not words:
            return None
        return words[(self.loss_hash(key) >> 8) % len(words)]

    def logits(self, ids, mask):
        """ids, mask: 1-D int arrays of one window -> (start, end) float32."""
        length = int(np.sum(mask != 0))
        row = [int(x) for x in ids[:length]]
        start, end = background(row, len(ids))
        try:
            first_sep = row.index(SEP)
        except ValueError:
            return start, end
        key = tuple(row[1:first_sep])
        if key not in self.answers:
            return start, end
        golds = self.answers[key]
        ctx_lo, ctx_hi = first_sep + 1, length - 1  # context part: [ctx_lo, ctx_hi)
        if self.loses(key):
            word = self.wrong_word(row, ctx_lo, ctx_hi, golds, key)
            s, e = word if word else (0, 0)
            start[s] = end[e] = PEAK
            return start, end
        if not golds:
            start[0] = end[0] = PEAK
            return start, end
        for g in golds:
            n = len(g)
            for s in range(ctx_lo, ctx_hi - n + 1):
                if tuple(row[s:s + n]) == g:
                    start[s] = PEAK
                    end[s + n - 1] = PEAK
                    return start, end
        return start, end
