"""Server-side tokenization for bertqa's text models: question + context strings in,
run_squad's windows out, exactly as `bertqa features` builds them (docs/algorithm.md
§2-§4), plus each token's character span in the context.

The word pieces come from the `tokenizers` package: its WordPiece model on
vocab/vocab.txt, after a normalizer and a pre-tokenizer of ours (custom components,
alignments tracked by tokenizers) that are the reference's BasicTokenizer
(algorithm.md §3.3). tokenizers' own BertNormalizer + BertPreTokenizer do not match it
(checked on tests/fixtures/squad/unicode.json, algorithm.md §3.7): they split `[SEP]`
written in a text, lower-case Greek capital sigma without Python's final-sigma rule, do
not isolate U+2B820..2B91F, and with older Unicode tables than Python 3.11's 14.0 keep
unassigned code points (the reference deletes them) and miss newer punctuation and
marks, turning such words into [UNK]. The equality with
`bertqa features` is checked by scripts/testbed/check_text_models.py.

Windows (algorithm.md §4): the context is split into words on the five run_squad
separators, each word is tokenized alone; the question keeps its first
`max_query_length` pieces; windows of `max_seq_length` tokens, `[CLS] q [SEP] doc [SEP]`,
segment ids 0/1 (the final [SEP] is 1), mask 1 on tokens, id/segment/mask 0 padding,
window starts `doc_stride` pieces apart.

Offsets: for each token, [start, end) in code points of the context (tokenizers'
alignments: a piece covers the characters it came from, so `Smith's` gives `smith`
[0, 5), `'` [5, 6), `s` [6, 7)); [-1, -1] for [CLS], question tokens, [SEP] and
padding.
"""
import unicodedata

import numpy as np
from tokenizers import (NormalizedString, PreTokenizedString, Regex, Tokenizer, models,
                        normalizers, pre_tokenizers)

SPECIALS = ("[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]")  # kept whole (never_split)
WORD_SEPARATORS = " \t\r\n\u202f"  # run_squad's is_whitespace (algorithm.md §2.1)
CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
       (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# After the clean step only these split a text as Python's str.split() does: every
# other Python whitespace character is a control (deleted) or category Zs (a space).
SPLIT = Regex("[ \u2028\u2029]")


def _deleted(c):
    return c not in "\t\n\r" and (c == "\0" or c == "\ufffd" or unicodedata.category(c)[0] == "C")


def _space(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _cjk(c):
    o = ord(c)
    return any(lo <= o <= hi for lo, hi in CJK)


def _punct(c):
    o = ord(c)
    return 33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126 or \
        unicodedata.category(c)[0] == "P"


class _Clean:
    """Normalizer: the reference's clean step (delete U+0000, U+FFFD and categories C*
    but \\t\\n\\r; whitespace and Zs become spaces) and CJK isolation."""

    def normalize(self, n: NormalizedString):
        n.filter(lambda c: not _deleted(c))
        n.map(lambda c: " " if _space(c) else c)
        for c in sorted({c for c in n.normalized if _cjk(c)}):
            n.replace(c, f" {c} ")


class _Basic:
    """Pre-tokenizer: whitespace split, then per token (special tokens aside)
    Python's lower(), NFD, removal of category Mn, and punctuation isolated."""

    def __init__(self, lower_case):
        self.lower_case = lower_case

    def _token(self, i, t):
        if t.normalized in SPECIALS:
            return [t]
        if self.lower_case:
            text = t.normalized
            low = text.lower()
            # Python's final-sigma rule (a per-character mapping gives σ): the mapping
            # of char k starts at len(text[:k].lower()) in low.
            for k, c in enumerate(text):
                if c == "Σ" and low[len(text[:k].lower())] == "ς":
                    t.replace(Regex(f"(?<=\\A.{{{k}}})Σ"), "ς")
            t.lowercase()
            t.nfd()
            t.filter(lambda c: unicodedata.category(c) != "Mn")
        text = t.normalized
        cuts = sorted({0, len(text)} | {k for k, c in enumerate(text) if _punct(c)}
                      | {k + 1 for k, c in enumerate(text) if _punct(c)})
        return [t.slice((a, b)) for a, b in zip(cuts, cuts[1:]) if b > a]

    def _split(self, i, n):
        return [p for t in n.split(SPLIT, "removed") if t.normalized for p in self._token(i, t)]

    def pre_tokenize(self, pretok: PreTokenizedString):
        pretok.split(self._split)


class TextFeatures:
    """`TextFeatures(vocab)(question, context)` -> the windows (see the module doc)."""

    def __init__(self, vocab_path, lower_case=True, max_seq_length=384, doc_stride=128,
                 max_query_length=64):
        self.max_seq_length = max_seq_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        vocab = {}
        with open(vocab_path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                vocab[line.strip()] = i  # a repeated token: the later line wins (§3.1)
        self.cls, self.sep = vocab["[CLS]"], vocab["[SEP]"]
        tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = normalizers.Normalizer.custom(_Clean())
        tok.pre_tokenizer = pre_tokenizers.PreTokenizer.custom(_Basic(lower_case))
        self.tok = tok
        self._docs = {}  # context -> its pieces; questions of a paragraph share them

    def _pieces(self, text):
        """(ids, offsets) of one string; offsets [start, end) in its code points."""
        enc = self.tok.encode(text, add_special_tokens=False)
        return enc.ids, enc.offsets

    def _doc(self, context):
        """The context's pieces, each run_squad word tokenized alone, and their offsets."""
        if context not in self._docs:
            doc_ids, doc_offs = [], []
            for start, word in _words(context):
                ids, offs = self._pieces(word)
                doc_ids.extend(ids)
                doc_offs.extend((start + s, start + e) for s, e in offs)
            if len(self._docs) >= 8:
                self._docs.pop(next(iter(self._docs)))
            self._docs[context] = (doc_ids, doc_offs)
        return self._docs[context]

    def __call__(self, question, context):
        """-> ids, segments, mask (int64 [windows, seq]), offsets (int32
        [windows, seq, 2]) and each token's index among the context's pieces (int32
        [windows, seq], -1 outside the context); no windows for a context without
        pieces."""
        q_ids, _ = self._pieces(question)
        q_ids = q_ids[: self.max_query_length]
        doc_ids, doc_offs = self._doc(context)
        room = self.max_seq_length - len(q_ids) - 3
        spans, s = [], 0
        while s < len(doc_ids):
            length = min(len(doc_ids) - s, room)
            spans.append((s, length))
            if s + length == len(doc_ids):
                break
            s += min(length, self.doc_stride)
        n, seq = len(spans), self.max_seq_length
        ids = np.zeros((n, seq), np.int64)
        seg = np.zeros((n, seq), np.int64)
        mask = np.zeros((n, seq), np.int64)
        offsets = np.full((n, seq, 2), -1, np.int32)
        pieces = np.full((n, seq), -1, np.int32)
        head = [self.cls] + q_ids + [self.sep]
        for w, (s, length) in enumerate(spans):
            row = head + doc_ids[s:s + length] + [self.sep]
            ids[w, :len(row)] = row
            seg[w, len(head):len(row)] = 1
            mask[w, :len(row)] = 1
            offsets[w, len(head):len(head) + length] = doc_offs[s:s + length]
            pieces[w, len(head):len(head) + length] = np.arange(s, s + length)
        return ids, seg, mask, offsets, pieces


def _words(context):
    """(start, word) for each run_squad word: maximal runs of non-separators."""
    out, start = [], None
    for i, c in enumerate(context):
        if c in WORD_SEPARATORS:
            if start is not None:
                out.append((start, context[start:i]))
                start = None
        elif start is None:
            start = i
    if start is not None:
        out.append((start, context[start:]))
    return out
