#!/usr/bin/env python3
"""The statistics of a paired comparison of two QA runs, computed independently of
bertqa (numpy and the standard library), for tests to check `bertqa compare`'s against.

Usage:
    TRITON_PYTHON scripts/testbed/compare_stats.py REF_PER_QUESTION.jsonl MODEL_PER_QUESTION.jsonl
        [--rounds 20000] [--seed 0] [--confidence 0.95]
(TRITON_PYTHON: the python of $BERTQA_CACHE/triton.env, the Triton venv's, which has numpy)

Inputs: the per_question.jsonl that `bertqa eval`/`compare` write per model, one JSON
object a line: id, prediction, exact (0/1), f1 (0..1), has_answer. Lines are paired by
id; the two files must hold the same ids, each once (else exit 2, saying which differ).

Output, one JSON object on stdout:
    {"questions": N,
     "exact_diff": {"value": V, "ci": [LO, HI], "p_value": P},
     "f1_diff": {"value": V, "ci": [LO, HI], "p_value": P},
     "flips": {"right_to_wrong": B, "wrong_to_right": C, "to_no_answer": T, "from_no_answer": F}}
- value: the mean over the questions of (model - reference) per-question score, x 100
  (points);
- ci: percentile interval of the paired bootstrap: `rounds` resamples of the question
  indices drawn with replacement (numpy default_rng(seed).integers, drawn in blocks of
  rounds; exact and f1 use the same resamples), each giving the mean difference; the
  numpy percentiles (linear) at (1 - confidence)/2 and (1 + confidence)/2, x 100;
- exact's p_value: McNemar's exact test, two-sided: b = right_to_wrong (reference exact,
  model not), c = wrong_to_right; p = min(1, 2 * sum_{i <= min(b, c)} C(b + c, i) / 2^(b + c))
  in exact rational arithmetic, 1 when b + c = 0;
- f1's p_value: paired sign-flip randomization test: each of `rounds` rounds flips the
  sign of each question's difference with probability 1/2 (a fresh default_rng(seed):
  random() < 0.5 flips); k = rounds whose |mean| >= |observed mean| - 1e-12;
  p = (1 + k) / (rounds + 1);
- flips: right_to_wrong, wrong_to_right by exact; to_no_answer: the reference predicted
  a non-empty answer and the model "", from_no_answer the reverse.
"""
import argparse
import json
import math
import sys
from fractions import Fraction

import numpy as np

TIE = 1e-12
BLOCK = 4_000_000  # draws (rounds x questions) held at once


def fail(msg):
    print(f"compare_stats.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read(path):
    rows = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                qid = r["id"]
                row = (float(r["exact"]), float(r["f1"]), r["prediction"])
            except (ValueError, KeyError, TypeError) as e:
                fail(f"{path}:{n}: not a per-question record ({e})")
            if qid in rows:
                fail(f"{path}:{n}: id {qid!r} appears twice")
            rows[qid] = row
    if not rows:
        fail(f"{path}: no questions")
    return rows


def pair(ref_path, model_path):
    ref, model = read(ref_path), read(model_path)
    if ref.keys() != model.keys():
        only_ref = [q for q in ref if q not in model]
        only_model = [q for q in model if q not in ref]
        fail(f"the files hold different questions: {len(only_ref)} only in {ref_path} "
             f"(first: {only_ref[:3]}), {len(only_model)} only in {model_path} "
             f"(first: {only_model[:3]})")
    return [(ref[q], model[q]) for q in ref]  # the reference's order


def bootstrap_ci(diffs, rounds, seed, confidence):
    """Percentile CIs (points) of the mean of each column of diffs [n, m] over `rounds`
    paired bootstrap resamples of the rows."""
    n = diffs.shape[0]
    rng = np.random.default_rng(seed)
    means = np.empty((rounds, diffs.shape[1]))
    step = max(1, BLOCK // n)
    for lo in range(0, rounds, step):
        hi = min(rounds, lo + step)
        idx = rng.integers(0, n, size=(hi - lo, n))
        means[lo:hi] = diffs[idx].mean(axis=1)
    qs = [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100]
    return [[float(v) * 100 for v in np.percentile(means[:, j], qs)] for j in range(diffs.shape[1])]


def mcnemar_exact(b, c):
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2 ** n)))


def sign_flip_p(d, rounds, seed):
    n = len(d)
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    k = 0
    step = max(1, BLOCK // n)
    for lo in range(0, rounds, step):
        m = min(rounds, lo + step) - lo
        signs = np.where(rng.random((m, n)) < 0.5, -1.0, 1.0)
        k += int(np.sum(np.abs((signs * d).mean(axis=1)) >= observed - TIE))
    return (1 + k) / (rounds + 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference", help="the reference run's per_question.jsonl")
    ap.add_argument("model", help="the compared run's per_question.jsonl")
    ap.add_argument("--rounds", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--confidence", type=float, default=0.95)
    a = ap.parse_args()
    if a.rounds < 1:
        fail("--rounds must be at least 1")
    if not 0 < a.confidence < 1:
        fail("--confidence must lie in (0, 1)")
    pairs = pair(a.reference, a.model)
    ref = np.array([[r[0], r[1]] for r, _ in pairs])
    mod = np.array([[m[0], m[1]] for _, m in pairs])
    diffs = mod - ref  # columns: exact, f1
    ci_exact, ci_f1 = bootstrap_ci(diffs, a.rounds, a.seed, a.confidence)
    ref_right = [r[0] == 1 for r, _ in pairs]
    mod_right = [m[0] == 1 for _, m in pairs]
    b = sum(1 for r, m in zip(ref_right, mod_right) if r and not m)
    c = sum(1 for r, m in zip(ref_right, mod_right) if m and not r)
    out = {
        "questions": len(pairs),
        "exact_diff": {"value": float(diffs[:, 0].mean()) * 100, "ci": ci_exact,
                       "p_value": mcnemar_exact(b, c)},
        "f1_diff": {"value": float(diffs[:, 1].mean()) * 100, "ci": ci_f1,
                    "p_value": sign_flip_p(diffs[:, 1], a.rounds, a.seed)},
        "flips": {
            "right_to_wrong": b,
            "wrong_to_right": c,
            "to_no_answer": sum(1 for r, m in pairs if r[2] != "" and m[2] == ""),
            "from_no_answer": sum(1 for r, m in pairs if r[2] == "" and m[2] != ""),
        },
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
