#!/usr/bin/env python3
"""Golden data for span decoding and scoring (tests/golden/decode/).

Run through scripts/golden/golden_decode.sh (the reference venv: transformers 4.46.3, Python
3.11). For one SQuAD fixture it:

1. builds features with transformers' slow BertTokenizer and
   squad_convert_examples_to_features (prediction mode) and saves what decoding needs
   (unique_id, example_index, tokens, token_to_orig_map, token_is_max_context) to
   features.json;
2. takes logits from --logits (a JSON list of {"unique_id", "start", "end"}, e.g. saved
   from a live model) or makes seeded random ones with hand-shaped patterns (ties,
   all-equal rows, peaks on "##" pieces, strong no-answer rows), saved to logits.json;
3. hf/: runs transformers' compute_predictions_logits (the H port, algorithm §6.13);
4. nvidia/: runs a from-scratch implementation, written from the spec, of the
   Google/NVIDIA write_predictions rules (§6.1–§6.10, with H's "empty" fallback, §10.19);
5. diffs.json: every question where the two modes' predictions differ, and checks that
   re-running (4) with H's detokenization (§6.13.1) reproduces (3) byte for byte;
6. scores.json: the official evaluate-v1.1 / evaluate-v2.0 algorithms (algorithm §8,
   written out below) on each mode's predictions (v2: without na-probs, and with
   null_odds.json at thresholds 1.0 and 0.0) and on perturbed predictions; v2 numbers
   are cross-checked against transformers' squad_evaluate where the two agree (§8.5).
"""
import argparse
import collections
import json
import math
import os
import re
import string
import sys

import numpy as np
from transformers import BertTokenizer
from transformers.data.metrics.squad_metrics import compute_predictions_logits, squad_evaluate
from transformers.data.processors.squad import (
    SquadResult,
    SquadV1Processor,
    SquadV2Processor,
    squad_convert_examples_to_features,
)
from transformers.models.bert.tokenization_bert import BasicTokenizer

SPECIALS = ["[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"]


def dump(path, obj):
    """The reference's writer: json.dumps(indent=4) + newline."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=4) + "\n")


# ---------------------------------------------------------------- logits


def make_logits(features, seq_len, seed, v2):
    rng = np.random.default_rng(seed)
    out = []
    for i, f in enumerate(features):
        start = rng.normal(0.0, 3.0, seq_len).astype(np.float32)
        end = rng.normal(0.0, 3.0, seq_len).astype(np.float32)
        kind = i % 6
        n = len(f.tokens)
        doc = sorted(f.token_to_orig_map)
        if kind == 1:
            # fp16-like coarse values: many ties, stable orders matter.
            start = (np.round(start * 2) / 2).astype(np.float32)
            end = (np.round(end * 2) / 2).astype(np.float32)
        elif kind == 2:
            # Peak the start on a "##" piece: the §6.13.1 difference.
            pieces = [p for p in doc if f.tokens[p].startswith("##")]
            if pieces:
                p = pieces[int(rng.integers(len(pieces)))]
                start[p] += 12.0
                end[min(p + int(rng.integers(3)), doc[-1])] += 12.0
        elif kind == 3:
            start[:] = 0.0
            end[:] = 0.0
        elif kind == 4 and v2:
            start[0] += 9.0
            end[0] += 9.0
        elif kind == 5:
            # A strong span somewhere in the doc (often across word boundaries).
            p = doc[int(rng.integers(len(doc)))]
            start[p] += 10.0
            end[min(p + int(rng.integers(6)), doc[-1])] += 10.0
        # Padding positions keep their random values: they compete in the top-k.
        assert n <= seq_len
        out.append(
            {
                "unique_id": f.unique_id,
                "start": [float(x) for x in start],
                "end": [float(x) for x in end],
            }
        )
    return out


# ---------------------------------------------------------------- nvidia (G/N rules)


def best_indexes(logits, n):
    """§6.2: stable descending sort of every position, first n."""
    order = sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)
    return order[:n]


def py_split_join(s):
    return " ".join(s.split())


def detok_nvidia(pieces):
    t = " ".join(pieces).replace(" ##", "").replace("##", "")
    return py_split_join(t)


def detok_hf(pieces):
    return py_split_join(" ".join(pieces).replace(" ##", "").strip())


def final_text(pred, orig, basic):
    """§6.7, written from the spec."""
    tok = " ".join(basic.tokenize(orig))
    p = tok.find(pred)
    if p < 0:
        return orig
    q = p + len(pred) - 1

    def strip(s):
        ns, m = [], []
        for i, c in enumerate(s):
            if c != " ":
                m.append(i)
                ns.append(c)
        return "".join(ns), m

    orig_ns, orig_map = strip(orig)
    tok_ns, tok_map = strip(tok)
    if len(orig_ns) != len(tok_ns):
        return orig
    inv = {s: ns for ns, s in enumerate(tok_map)}
    if p not in inv or inv[p] >= len(orig_map):
        return orig
    if q not in inv or inv[q] >= len(orig_map):
        return orig
    return orig[orig_map[inv[p]] : orig_map[inv[q]] + 1]


def softmax(scores):
    m = scores[0]
    for s in scores[1:]:
        if s > m:
            m = s
    e = [math.exp(s - m) for s in scores]
    total = 0.0
    for x in e:
        total += x
    return [x / total for x in e]


def decode_nvidia(examples, features, logits, n_best, max_len, v2, threshold, basic, detok):
    by_example = collections.defaultdict(list)
    for f in features:
        by_example[f.example_index].append(f)
    by_uid = {l["unique_id"]: l for l in logits}
    preds, nbests, odds = {}, {}, {}
    for ei, ex in enumerate(examples):
        feats = sorted(by_example[ei], key=lambda f: f.unique_id)
        prelims = []
        score_null, null_fi, null_s, null_e = 1000000.0, 0, 0.0, 0.0
        for fi, f in enumerate(feats):
            l = by_uid[f.unique_id]
            s_log, e_log = l["start"], l["end"]
            if v2:
                z = s_log[0] + e_log[0]
                if z < score_null:
                    score_null, null_fi, null_s, null_e = z, fi, s_log[0], e_log[0]
            for s in best_indexes(s_log, n_best):
                for e in best_indexes(e_log, n_best):
                    if s >= len(f.tokens) or e >= len(f.tokens):
                        continue
                    if s not in f.token_to_orig_map or e not in f.token_to_orig_map:
                        continue
                    if not f.token_is_max_context.get(s, False):
                        continue
                    if e < s or e - s + 1 > max_len:
                        continue
                    prelims.append((fi, s, e, s_log[s], e_log[e]))
        if v2:
            prelims.append((null_fi, 0, 0, null_s, null_e))
        prelims.sort(key=lambda p: p[3] + p[4], reverse=True)
        seen, nbest = set(), []
        for fi, s, e, sl, el in prelims:
            if len(nbest) >= n_best:
                break
            if s > 0:
                f = feats[fi]
                tok_text = detok(f.tokens[s : e + 1])
                a, b = f.token_to_orig_map[s], f.token_to_orig_map[e]
                orig = " ".join(ex.doc_tokens[a : b + 1])
                text = final_text(tok_text, orig, basic)
                if text in seen:
                    continue
                seen.add(text)
            else:
                text = ""
                seen.add("")
            nbest.append((text, sl, el))
        if v2:
            if "" not in seen:
                nbest.append(("", null_s, null_e))
            if len(nbest) == 1:
                nbest.insert(0, ("empty", 0.0, 0.0))
        if not nbest:
            nbest.append(("empty", 0.0, 0.0))
        probs = softmax([s + e for _, s, e in nbest])
        nbests[ex.qas_id] = [
            collections.OrderedDict(
                [("text", t), ("probability", p), ("start_logit", s), ("end_logit", e)]
            )
            for (t, s, e), p in zip(nbest, probs)
        ]
        if v2:
            best = next(x for x in nbest if x[0])
            diff = score_null - best[1] - best[2]
            odds[ex.qas_id] = diff
            preds[ex.qas_id] = "" if diff > threshold else best[0]
        else:
            preds[ex.qas_id] = nbest[0][0]
    return preds, nbests, odds


# ---------------------------------------------------------------- official evaluators (§8)


def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def e1_f1(prediction, ground_truth):
    p = normalize_answer(prediction).split()
    g = normalize_answer(ground_truth).split()
    common = collections.Counter(p) & collections.Counter(g)
    same = sum(common.values())
    if same == 0:
        return 0
    precision = 1.0 * same / len(p)
    recall = 1.0 * same / len(g)
    return (2 * precision * recall) / (precision + recall)


def e1(dataset, predictions):
    f1 = exact = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                golds = [a["text"] for a in qa["answers"]]
                pred = predictions[qa["id"]]
                exact += max(normalize_answer(pred) == normalize_answer(g) for g in golds)
                f1 += max(e1_f1(pred, g) for g in golds)
    return collections.OrderedDict(
        [("exact_match", 100.0 * exact / total), ("f1", 100.0 * f1 / total)]
    )


def e2_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def e2_f1(gold, pred):
    g, p = e2_tokens(gold), e2_tokens(pred)
    common = collections.Counter(g) & collections.Counter(p)
    same = sum(common.values())
    if len(g) == 0 or len(p) == 0:
        return int(g == p)
    if same == 0:
        return 0
    precision = 1.0 * same / len(p)
    recall = 1.0 * same / len(g)
    return (2 * precision * recall) / (precision + recall)


def e2(dataset, preds, na_probs=None, na_prob_thresh=1.0):
    has_ans = collections.OrderedDict()
    exact_raw, f1_raw = collections.OrderedDict(), collections.OrderedDict()
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid = qa["id"]
                has_ans[qid] = bool(qa["answers"])
                golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
                if not golds:
                    golds = [""]
                if qid not in preds:
                    continue
                exact_raw[qid] = max(int(normalize_answer(a) == normalize_answer(preds[qid])) for a in golds)
                f1_raw[qid] = max(e2_f1(a, preds[qid]) for a in golds)
    use_na = na_probs is not None
    if not use_na:
        na_probs = {k: 0.0 for k in preds}

    def thresh(scores):
        return collections.OrderedDict(
            (q, float(not has_ans[q]) if na_probs[q] > na_prob_thresh else s) for q, s in scores.items()
        )

    ex_t, f1_t = thresh(exact_raw), thresh(f1_raw)

    def ev(qids):
        return [
            ("exact", 100.0 * sum(ex_t[k] for k in qids) / len(qids)),
            ("f1", 100.0 * sum(f1_t[k] for k in qids) / len(qids)),
            ("total", len(qids)),
        ]

    out = collections.OrderedDict(
        [
            ("exact", 100.0 * sum(ex_t.values()) / len(ex_t)),
            ("f1", 100.0 * sum(f1_t.values()) / len(f1_t)),
            ("total", len(ex_t)),
        ]
    )
    has = [k for k, v in has_ans.items() if v]
    no = [k for k, v in has_ans.items() if not v]
    if has:
        for k, v in ev(has):
            out["HasAns_" + k] = v
    if no:
        for k, v in ev(no):
            out["NoAns_" + k] = v
    if use_na:
        for name, raw in [("exact", exact_raw), ("f1", f1_raw)]:
            cur = best = sum(1 for k in has_ans if not has_ans[k])
            best_t = 0.0
            for qid in sorted(na_probs, key=lambda k: na_probs[k]):
                if qid not in raw:
                    continue
                if has_ans[qid]:
                    d = raw[qid]
                else:
                    d = -1 if preds[qid] else 0
                cur += d
                if cur > best:
                    best, best_t = cur, na_probs[qid]
            out["best_" + name] = 100.0 * best / len(raw)
            out["best_" + name + "_thresh"] = best_t
    return out


def perturb(dataset, seed):
    """Predictions near the gold answers: case, articles, punctuation, partial spans,
    wrong answers, "" for some, so every normalization path is scored."""
    rng = np.random.default_rng(seed)
    out = collections.OrderedDict()
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                golds = [a["text"] for a in qa["answers"]] or [""]
                g = golds[int(rng.integers(len(golds)))]
                k = int(rng.integers(7))
                if k == 0:
                    t = g.upper()
                elif k == 1:
                    t = "The " + g + "."
                elif k == 2:
                    t = " ".join(g.split()[: max(1, len(g.split()) // 2)])
                elif k == 3:
                    t = g + " and an apple"
                elif k == 4:
                    t = ""
                elif k == 5:
                    t = "a"
                else:
                    t = g
                out[qa["id"]] = t
    return out


# ---------------------------------------------------------------- main


def float_repr_cases(path, seed):
    """Python repr of doubles that stress the shortest-digit rules: widened f32 logits
    (where shortest-digit ties occur), random bit patterns, decimal-exponent edges."""
    import struct

    rng = np.random.default_rng(seed)
    xs = [float(x) for x in rng.normal(0, 5, 1500).astype(np.float32)]
    xs += [float(x) for x in (rng.normal(0, 1, 500) * 10.0 ** rng.integers(-30, 30, 500))]
    xs += [struct.unpack("<d", struct.pack("<Q", int(b)))[0] for b in rng.integers(0, 2**63 - 1, 500, dtype=np.int64)]
    xs += [float(x) for x in (np.arange(1, 200, dtype=np.float32) / np.float32(3.0))]
    for e in range(-8, 20):
        xs += [10.0**e, -(10.0**e), 1.5 * 10.0**e, 10.0**e - 10.0 ** (e - 17)]
    xs = [x for x in xs if math.isfinite(x)]
    cases = [["%016x" % struct.unpack("<Q", struct.pack("<d", x))[0], repr(x)] for x in xs]
    with open(path, "w") as f:
        json.dump(cases, f, indent=0)
        f.write("\n")


class Feat:
    """What decoding reads from a transformers SquadFeatures."""

    def __init__(self, f):
        self.unique_id = f.unique_id
        self.example_index = f.example_index
        self.tokens = list(f.tokens)
        self.token_to_orig_map = dict(f.token_to_orig_map)
        self.token_is_max_context = dict(f.token_is_max_context)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", default="vocab/vocab.txt")
    ap.add_argument("--logits", help="use these logits instead of random ones")
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--doc-stride", type=int, default=32)
    ap.add_argument("--max-query-length", type=int, default=32)
    ap.add_argument("--n-best-size", type=int, default=20)
    ap.add_argument("--max-answer-length", type=int, default=30)
    ap.add_argument("--null-score-diff-threshold", type=float, default=0.0)
    ap.add_argument("--float-repr", help="also write Python float repr cases to this file")
    args = ap.parse_args()
    if args.float_repr:
        float_repr_cases(args.float_repr, args.seed)

    with open(args.data, encoding="utf-8") as f:
        raw = json.load(f)
    v2 = str(raw.get("version", "")).lstrip("v").startswith("2")
    proc = SquadV2Processor() if v2 else SquadV1Processor()
    examples = proc.get_dev_examples(os.path.dirname(args.data), os.path.basename(args.data))
    tokenizer = BertTokenizer(args.vocab, do_lower_case=True)
    hf_features = squad_convert_examples_to_features(
        examples,
        tokenizer,
        args.max_seq_length,
        args.doc_stride,
        args.max_query_length,
        is_training=False,
        return_dataset=False,
        threads=1,
        tqdm_enabled=False,
    )
    feats = [Feat(f) for f in hf_features]
    assert len({f.example_index for f in feats}) == len(examples), "an example has no features"
    out = args.out
    os.makedirs(out, exist_ok=True)
    saved = []
    for f, hf in zip(feats, hf_features):
        keys = sorted(f.token_to_orig_map)
        q = f.tokens.index("[SEP]") - 1
        assert keys == list(range(q + 2, q + 2 + len(keys))), "non-contiguous doc positions"
        assert sorted(f.token_is_max_context) == keys
        ex = examples[f.example_index]
        saved.append(
            collections.OrderedDict(
                [
                    ("unique_id", f.unique_id),
                    ("example_index", f.example_index),
                    ("qas_id", ex.qas_id),
                    ("tokens", f.tokens),
                    ("query_len", q),
                    ("token_to_orig", [f.token_to_orig_map[k] for k in keys]),
                    ("token_is_max_context", [bool(f.token_is_max_context[k]) for k in keys]),
                ]
            )
        )
    config = collections.OrderedDict(
        [
            ("max_seq_length", args.max_seq_length),
            ("doc_stride", args.doc_stride),
            ("max_query_length", args.max_query_length),
            ("n_best_size", args.n_best_size),
            ("max_answer_length", args.max_answer_length),
            ("version_2_with_negative", v2),
            ("null_score_diff_threshold", args.null_score_diff_threshold),
            ("lower_case", True),
        ]
    )
    with open(os.path.join(out, "features.json"), "w") as f:
        json.dump({"config": config, "features": saved}, f, ensure_ascii=True)
        f.write("\n")

    if args.logits:
        with open(args.logits) as f:
            logits = json.load(f)
    else:
        logits = make_logits(feats, args.max_seq_length, args.seed, v2)
    with open(os.path.join(out, "logits.json"), "w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(l) for l in logits))
        f.write("\n]\n")

    # hf: transformers' own post-processing.
    results = [SquadResult(l["unique_id"], l["start"], l["end"]) for l in logits]
    os.makedirs(os.path.join(out, "hf"), exist_ok=True)
    hf_preds = compute_predictions_logits(
        examples,
        hf_features,
        results,
        args.n_best_size,
        args.max_answer_length,
        True,
        os.path.join(out, "hf", "predictions.json"),
        os.path.join(out, "hf", "nbest_predictions.json"),
        os.path.join(out, "hf", "null_odds.json") if v2 else None,
        False,
        v2,
        args.null_score_diff_threshold,
        tokenizer,
    )

    # nvidia: our reading of the spec. get_final_text uses the N basic tokenizer
    # (never_split specials); transformers' adds NFC, a no-op for these lower-cased texts.
    basic = BasicTokenizer(do_lower_case=True, never_split=SPECIALS)
    run = lambda detok: decode_nvidia(
        examples, feats, logits, args.n_best_size, args.max_answer_length, v2,
        args.null_score_diff_threshold, basic, detok,
    )
    nv_preds, nv_nbest, nv_odds = run(detok_nvidia)
    dump(os.path.join(out, "nvidia", "predictions.json"), nv_preds)
    dump(os.path.join(out, "nvidia", "nbest_predictions.json"), nv_nbest)
    if v2:
        dump(os.path.join(out, "nvidia", "null_odds.json"), nv_odds)

    # The §6.13.1 explanation: our implementation with H's detokenization is H.
    h_like = run(detok_hf)
    for name, ours in [("predictions", h_like[0]), ("nbest_predictions", h_like[1])] + (
        [("null_odds", h_like[2])] if v2 else []
    ):
        with open(os.path.join(out, "hf", name + ".json")) as f:
            assert f.read() == json.dumps(ours, indent=4) + "\n", f"hf {name} not explained by §6.13.1"
    diffs = [
        collections.OrderedDict([("id", q), ("nvidia", nv_preds[q]), ("hf", hf_preds[q]), ("rule", "6.13.1")])
        for q in nv_preds
        if nv_preds[q] != hf_preds[q]
    ]
    dump(os.path.join(out, "diffs.json"), diffs)

    # Scores with the official algorithms.
    dataset = raw["data"]
    pert = perturb(dataset, args.seed)
    dump(os.path.join(out, "perturbed_predictions.json"), pert)
    cases = []

    def add(name, preds_file, preds, na_file=None, na=None, thresh=1.0):
        if v2:
            m = e2(dataset, preds, na, thresh)
        else:
            m = e1(dataset, preds)
        cases.append(
            collections.OrderedDict(
                [
                    ("name", name),
                    ("predictions", preds_file),
                    ("na_prob_file", na_file),
                    ("na_prob_thresh", thresh),
                    ("version", "v2.0" if v2 else "v1.1"),
                    ("metrics", m),
                ]
            )
        )
        return m

    add("perturbed", "perturbed_predictions.json", pert)
    for mode, preds, odds in [("nvidia", nv_preds, nv_odds), ("hf", hf_preds, h_like[2])]:
        add(mode, f"{mode}/predictions.json", preds)
        if v2:
            for t in [1.0, 0.0, -2.5]:
                m = add(f"{mode} na {t}", f"{mode}/predictions.json", preds, f"{mode}/null_odds.json", odds, t)
                # transformers' squad_evaluate agrees with E2 when every qid is predicted.
                h = squad_evaluate(examples, preds, odds, t)
                for k, v in m.items():
                    assert h[k] == v, (k, h[k], v)
    dump(os.path.join(out, "scores.json"), cases)
    print(
        f"{out}: {len(examples)} questions, {len(feats)} features, "
        f"{len(diffs)} nvidia/hf differences",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
