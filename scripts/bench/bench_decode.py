#!/usr/bin/env python3
"""Synthetic SQuAD-dev-sized decoding input, and the reference's post-processing time.

Writes into --out: squad.json (SQuAD v1.1 format, ~10,570 questions), vocab.txt,
features.jsonl (one feature per line: unique_id, example_index, input_ids unpadded,
query_len, token_to_orig, token_is_max_context), logits.f32 (little-endian float32,
per feature 384 start then 384 end), and hf_predictions.json from transformers'
compute_predictions_logits, timed as post_s (printed as JSON on stdout).
"""
import argparse
import json
import os
import time
from types import SimpleNamespace

import numpy as np
from transformers.data.metrics.squad_metrics import compute_predictions_logits
from transformers.data.processors.squad import SquadResult


class PieceTokenizer:
    """convert_tokens_to_string of BertTokenizer (what compute_predictions_logits uses)."""

    def convert_tokens_to_string(self, tokens):
        return " ".join(tokens).replace(" ##", "").strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--questions", type=int, default=10570)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--seq", type=int, default=384)
    ap.add_argument("--stride", type=int, default=128)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    os.makedirs(args.out, exist_ok=True)

    # A vocabulary of syllable words; a word is 1-3 pieces ("##"-continued).
    syll = [a + b for a in "bcdfghklmnprstvz" for b in ["a", "e", "i", "o", "u", "ai", "ou"]]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "?"]
    words = []
    for i in range(3000):
        n = 1 + int(rng.integers(3))
        parts = [syll[int(rng.integers(len(syll)))] + syll[int(rng.integers(len(syll)))] for _ in range(n)]
        words.append(parts)
    pieces = set()
    for w in words:
        pieces.add(w[0])
        pieces.update("##" + p for p in w[1:])
    vocab += sorted(pieces)
    ids = {t: i for i, t in enumerate(vocab)}
    with open(os.path.join(args.out, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")

    # Paragraphs of 60-260 words (5 questions each); most fit one 384 window.
    examples, features, data = [], [], []
    uid = 1000000000
    qi = 0
    while qi < args.questions:
        nwords = int(rng.integers(40, 180))
        wids = rng.integers(len(words), size=nwords)
        doc_tokens = ["".join(p[:1] + [x for x in p[1:]]) for p in (words[w] for w in wids)]
        doc_pieces, tok_to_orig = [], []
        for wi, w in enumerate(wids):
            p = words[w]
            doc_pieces.append(p[0])
            doc_pieces += ["##" + x for x in p[1:]]
            tok_to_orig += [wi] * len(p)
        context = " ".join(doc_tokens)
        qas = []
        for _ in range(5):
            if qi >= args.questions:
                break
            qlen = int(rng.integers(6, 16))
            q = [vocab[int(rng.integers(8, len(vocab)))] for _ in range(qlen)]
            a = int(rng.integers(nwords - 3))
            ans = " ".join(doc_tokens[a : a + 1 + int(rng.integers(3))])
            qid = f"q{qi:05d}"
            qas.append({"id": qid, "question": " ".join(q), "answers": [{"text": ans, "answer_start": context.find(ans)}]})
            ex = SimpleNamespace(qas_id=qid, doc_tokens=doc_tokens)
            examples.append(ex)
            max_doc = args.seq - len(q) - 3
            spans, start = [], 0
            while start < len(doc_pieces):
                length = min(len(doc_pieces) - start, max_doc)
                spans.append((start, length))
                if start + length == len(doc_pieces):
                    break
                start += min(length, args.stride)
            for k, (s, L) in enumerate(spans):
                tokens = ["[CLS]"] + q + ["[SEP]"] + doc_pieces[s : s + L] + ["[SEP]"]
                t2o, maxc = {}, {}
                for j in range(L):
                    pos = len(q) + 2 + j
                    t2o[pos] = tok_to_orig[s + j]
                    best, best_i = None, None
                    for i2, (s2, L2) in enumerate(spans):
                        e2 = s2 + L2 - 1
                        if s + j < s2 or s + j > e2:
                            continue
                        score = min(s + j - s2, e2 - (s + j)) + 0.01 * L2
                        if best is None or score > best:
                            best, best_i = score, i2
                    maxc[pos] = best_i == k
                features.append(
                    SimpleNamespace(
                        unique_id=uid, example_index=len(examples) - 1, tokens=tokens,
                        token_to_orig_map=t2o, token_is_max_context=maxc, query_len=len(q),
                    )
                )
                uid += 1
            qi += 1
        data.append({"context": context, "qas": qas})
    with open(os.path.join(args.out, "squad.json"), "w") as f:
        json.dump({"version": "1.1", "data": [{"title": "synthetic", "paragraphs": data}]}, f)
    with open(os.path.join(args.out, "features.jsonl"), "w") as f:
        for ft in features:
            keys = sorted(ft.token_to_orig_map)
            f.write(json.dumps({
                "unique_id": ft.unique_id, "example_index": ft.example_index,
                "input_ids": [ids[t] for t in ft.tokens], "query_len": ft.query_len,
                "token_to_orig": [ft.token_to_orig_map[k] for k in keys],
                "token_is_max_context": [ft.token_is_max_context[k] for k in keys],
            }) + "\n")
    logits = rng.normal(0, 3, (len(features), 2, args.seq)).astype("<f4")
    logits.tofile(os.path.join(args.out, "logits.f32"))

    results = [SquadResult(f.unique_id, [float(x) for x in l[0]], [float(x) for x in l[1]]) for f, l in zip(features, logits)]
    t0 = time.perf_counter()
    compute_predictions_logits(
        examples, features, results, 20, 30, True,
        os.path.join(args.out, "hf_predictions.json"), os.path.join(args.out, "hf_nbest.json"),
        None, False, False, 0.0, PieceTokenizer(),
    )
    post_s = time.perf_counter() - t0
    print(json.dumps({"questions": len(examples), "features": len(features), "post_s": post_s}))


if __name__ == "__main__":
    main()
