#!/usr/bin/env python3
"""Golden data for bertqa's tokenizer and feature tests (tests/golden/features/).

Run it with the reference venv (transformers 4.46.3, Python 3.11 = Unicode 14.0):
    bash scripts/golden/golden_features.sh          # sets up the venv and vocab, then runs this
    bash scripts/golden/golden_features.sh --data FILE > ref.jsonl   # any file, to diff

It calls transformers' slow BertTokenizer and squad_convert_examples_to_features
(is_training=False) on our fixtures (tests/fixtures/squad/) and writes, per fixture,
casing and window geometry, one JSON line per feature in exactly the format of
`bertqa features`, so `diff` shows any difference.

transformers (spec "H") departs from NVIDIA's reference ("N", which bertqa follows) in
three places that our fixtures reach; this script switches each one to N's rule, so
the goldens are N's output:
  1. NFC before the whitespace split (H slow tokenizer, algorithm §3.6/§3.7): turned off.
     It changes cased tokenization of decomposed accents ("Cafe\u0301").
  2. `PreTrainedTokenizer.tokenize` splits the text on added special tokens before the
     basic tokenizer (so "text[SEP]glued" gives a real [SEP]) and lower-cases the
     text one character at a time (so Greek final sigma is never produced): replaced
     by N's full tokenizer, basic tokenizer then WordPiece on every basic token.
  3. example_index (algorithm §4.7): H numbers only examples that produced features; N
     counts every example. We write N's index (the example's position in the file).
  4. A question without pieces (empty, §10): H's encode_plus rejects the empty id list
     (ValueError); N builds [CLS] [SEP] doc [SEP]. For that case only, the pair goes
     straight to transformers' own prepare_for_model, which builds N's layout.
Everything else (reading, word split, windows, maps, max-context, ids) is
transformers' own code.
"""
import json
import os
import sys
import unicodedata

import transformers.models.bert.tokenization_bert as tokenization_bert
from transformers import BertTokenizer
from transformers.data.processors.squad import (SquadV1Processor, SquadV2Processor,
                                                squad_convert_examples_to_features)
from transformers.utils import logging as hf_logging

hf_logging.set_verbosity_error()

if unicodedata.unidata_version != "14.0.0":
    sys.exit(f"need Python 3.11 (Unicode 14.0.0), have {unicodedata.unidata_version}")

# scripts/golden/golden_features.py: the project root is three levels up.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures", "squad")
OUT = os.path.join(ROOT, "tests", "golden", "features")
UNCASED = os.path.join(ROOT, "vocab", "vocab.txt")
CASED = os.path.join(FIX, "vocab-cased.txt")
NEVER_SPLIT = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]


class _WithoutNfc:
    """unicodedata, except that NFC is the identity (departure 1)."""

    def __getattr__(self, name):
        return getattr(unicodedata, name)

    @staticmethod
    def normalize(form, text):
        return text if form == "NFC" else unicodedata.normalize(form, text)


tokenization_bert.unicodedata = _WithoutNfc()


def make_tokenizer(vocab, lower):
    tok = BertTokenizer(vocab, do_lower_case=lower, never_split=NEVER_SPLIT,
                        tokenize_chinese_chars=True, strip_accents=None)
    basic, wordpiece = tok.basic_tokenizer, tok.wordpiece_tokenizer

    def n_tokenize(text, **_kwargs):  # departure 2
        return [p for t in basic.tokenize(text) for p in wordpiece.tokenize(t)]

    tok.tokenize = n_tokenize
    encode_plus = tok.encode_plus

    def encode_plus_n(text, text_pair=None, **kwargs):  # departure 4
        if isinstance(text, list) and not text:
            pair = text_pair
            if pair and isinstance(pair[0], str):
                pair = tok.convert_tokens_to_ids(pair)
            return tok.prepare_for_model([], pair, **kwargs)
        return encode_plus(text, text_pair, **kwargs)

    tok.encode_plus = encode_plus_n
    return tok


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def feature_lines(path, vocab, lower, seq, stride, query):
    tok = make_tokenizer(vocab, lower)
    data = json.load(open(path, encoding="utf-8"))
    v2 = str(data.get("version", "")).startswith("v2")
    proc = SquadV2Processor() if v2 else SquadV1Processor()
    examples = proc.get_dev_examples(os.path.dirname(os.path.abspath(path)),
                                     filename=os.path.basename(path))
    feats = squad_convert_examples_to_features(
        examples, tok, max_seq_length=seq, doc_stride=stride, max_query_length=query,
        is_training=False, return_dataset=False, threads=1, tqdm_enabled=False)
    index_of = {ex.qas_id: i for i, ex in enumerate(examples)}  # departure 3
    spans = {}
    for f in feats:
        k = spans.get(f.qas_id, 0)
        spans[f.qas_id] = k + 1
        n = sum(f.attention_mask)
        yield dumps({
            "unique_id": f.unique_id,
            "example_index": index_of[f.qas_id],
            "qas_id": f.qas_id,
            "doc_span_index": k,
            "tokens": tok.convert_ids_to_tokens(f.input_ids[:n]),
            "input_ids": f.input_ids,
            "segment_ids": f.token_type_ids,
            "input_mask": f.attention_mask,
            "token_to_orig_map": f.token_to_orig_map,
            "token_is_max_context": f.token_is_max_context,
        })


# (fixture, casing, (max_seq_length, doc_stride, max_query_length))
DEFAULT = (384, 128, 64)
SMALL = (64, 24, 16)
FEATURE_RUNS = [
    ("v1-long.json", "uncased", DEFAULT),
    ("v1-long.json", "uncased", SMALL),
    ("v2-long.json", "uncased", DEFAULT),
    ("v2-long.json", "uncased", SMALL),
    ("unicode.json", "uncased", DEFAULT),
    ("unicode.json", "uncased", SMALL),
    ("degenerate.json", "uncased", DEFAULT),
    ("v1-long.json", "cased", DEFAULT),
    ("unicode.json", "cased", DEFAULT),
    ("unicode.json", "cased", SMALL),
]


def golden_name(fixture, casing, geometry):
    return f"{fixture[:-5]}.{casing}.{'-'.join(map(str, geometry))}.jsonl"


def texts_of_fixtures():
    """Every context and question of the fixtures, and every reader word of them."""
    out = []
    for name in sorted(os.listdir(FIX)):
        if not name.endswith(".json"):
            continue
        data = json.load(open(os.path.join(FIX, name), encoding="utf-8"))
        for art in data["data"]:
            for para in art["paragraphs"]:
                out.append(para["context"])
                out.extend(qa["question"] for qa in para["qas"])
                words = para["context"].replace("\t", " ").replace("\r", " ")
                out.extend(words.replace("\n", " ").replace("\u202f", " ").split(" "))
    seen, unique = set(), []
    for t in out:
        if t and t not in seen:
            seen.add(t)
            unique.append(t)
    return unique


def tokenize_lines():
    toks = {"uncased": make_tokenizer(UNCASED, True), "cased": make_tokenizer(CASED, False)}
    for text in texts_of_fixtures():
        for casing, tok in toks.items():
            pieces = tok.tokenize(text)
            yield dumps({"casing": casing, "text": text,
                         "basic": tok.basic_tokenizer.tokenize(text),
                         "ids": tok.convert_tokens_to_ids(pieces)})


def fnv1a64(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


SWEEP_BLOCKS = list(range(0, 0x32000, 256)) + [0xE0000, 0xE0100, 0xF0000, 0x10FF00]


def sweep_probe(c):
    """The string the sweep tokenizes for code point c (same in the Rust test)."""
    return "a" + c + "A\u03a3" + c + "\u03a3" + c


def sweep_lines():
    basics = {lower: make_tokenizer(UNCASED, lower).basic_tokenizer for lower in (True, False)}
    for start in SWEEP_BLOCKS:
        hashes = []
        for lower in (True, False):
            h = 0xCBF29CE484222325
            for cp in range(start, start + 256):
                if 0xD800 <= cp <= 0xDFFF:
                    continue
                rec = " ".join(basics[lower].tokenize(sweep_probe(chr(cp)))) + "\n"
                h = fnv1a64(rec.encode("utf-8"), h)
            hashes.append(f"{h:016x}")
        yield f"{start:06x}\t{hashes[0]}\t{hashes[1]}"


def write(name, lines):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        n = 0
        for line in lines:
            f.write(line + "\n")
            n += 1
    print(f"wrote {os.path.relpath(path, ROOT)} ({n} lines)", file=sys.stderr)


def main():
    if len(sys.argv) > 1:
        # Any SQuAD file: the reference features on stdout, to diff against
        # `bertqa features --data FILE` (uncased vocab/vocab.txt, 384/128/64).
        if len(sys.argv) != 3 or sys.argv[1] != "--data":
            sys.exit("usage: golden_features.py [--data FILE]")
        for line in feature_lines(sys.argv[2], UNCASED, True, *DEFAULT):
            sys.stdout.write(line + "\n")
        return
    if not os.path.exists(UNCASED):
        sys.exit("vocab/vocab.txt missing: run scripts/install_vocab.sh")
    os.makedirs(OUT, exist_ok=True)
    for fixture, casing, geometry in FEATURE_RUNS:
        print(f"features: {fixture} {casing} {geometry}", file=sys.stderr)
        vocab, lower = (UNCASED, True) if casing == "uncased" else (CASED, False)
        write(golden_name(fixture, casing, geometry),
              feature_lines(os.path.join(FIX, fixture), vocab, lower, *geometry))
    write("tokenize.jsonl", tokenize_lines())
    write("unicode-sweep.tsv", sweep_lines())


if __name__ == "__main__":
    main()
