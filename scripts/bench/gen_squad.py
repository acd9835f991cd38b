"""Writes a synthetic SQuAD v1.1-format file with the shape of the SQuAD v1.1 dev set,
for benchmarks: about 10,570 questions over 2,067 paragraphs of 120 words on average
(a long tail up to 700 words), questions of about 10 words, one to three gold answers
copied from the context. The text is made of words from our own sample file and the
vocabulary given, drawn with a fixed seed, so every run writes the same file.

usage: python3 gen_squad.py OUT.json [--vocab vocab/vocab.txt] [--paragraphs 2067]
       [--questions 10570] [--seed 1] [--v2]   (--v2: a third of questions impossible)
"""
import argparse
import json
import random
import re

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--vocab", default="vocab/vocab.txt")
ap.add_argument("--paragraphs", type=int, default=2067)
ap.add_argument("--questions", type=int, default=10570)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--v2", action="store_true")
a = ap.parse_args()
rng = random.Random(a.seed)

words = [w.strip() for w in open(a.vocab, encoding="utf-8")]
words = [w for w in words if re.fullmatch(r"[a-z]{2,12}", w)]
common = words[:3000]
caps = lambda w: w[:1].upper() + w[1:]  # noqa: E731


def sentence(n):
    ws = [rng.choice(common if rng.random() < 0.8 else words) for _ in range(n)]
    ws[0] = caps(ws[0])
    for i in range(1, n - 1):
        r = rng.random()
        if r < 0.05:
            ws[i] += ","
        elif r < 0.08:
            ws[i] = caps(ws[i])
        elif r < 0.10:
            ws[i] = str(rng.randint(2, 2024))
    return " ".join(ws) + "."


def paragraph_length():
    # Log-normal-ish: mean ~120 words, long tail clipped at 700.
    return max(25, min(700, int(rng.lognormvariate(4.66, 0.5))))


per_para = [a.questions // a.paragraphs] * a.paragraphs
for i in range(a.questions - sum(per_para)):
    per_para[i] += 1
articles, qid = [], 0
for p in range(a.paragraphs):
    target = paragraph_length()
    sents, n = [], 0
    while n < target:
        k = min(rng.randint(8, 28), target - n) if target - n > 8 else target - n
        sents.append(sentence(max(k, 3)))
        n += max(k, 3)
    context = " ".join(sents)
    tokens = [(m.start(), m.group()) for m in re.finditer(r"\S+", context)]
    qas = []
    for _ in range(per_para[p]):
        qid += 1
        q = " ".join(rng.choice(common) for _ in range(rng.randint(6, 14)))
        question = caps(q) + "?"
        if a.v2 and rng.random() < 1 / 3:
            qas.append({"id": f"gen-{qid:06d}", "question": question, "answers": [], "is_impossible": True})
            continue
        answers = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            s = rng.randrange(len(tokens))
            e = min(len(tokens) - 1, s + rng.randint(0, 4))
            start = tokens[s][0]
            text = context[start:tokens[e][0] + len(tokens[e][1])].rstrip(".,")
            answers.append({"text": text, "answer_start": start})
        qa = {"id": f"gen-{qid:06d}", "question": question, "answers": answers}
        if a.v2:
            qa["is_impossible"] = False
        qas.append(qa)
    articles.append({"title": f"Synthetic_{p // 40}", "paragraphs": [{"context": context, "qas": qas}]})

# Group paragraphs into articles of up to 40 like the dev set (48 articles).
grouped = {}
for art in articles:
    grouped.setdefault(art["title"], []).extend(art["paragraphs"])
data = {"version": "v2.0" if a.v2 else "1.1",
        "data": [{"title": t, "paragraphs": ps} for t, ps in grouped.items()]}
with open(a.out, "w", encoding="utf-8") as f:
    json.dump(data, f)
lens = [len(p["context"].split()) for art in data["data"] for p in art["paragraphs"]]
print(f"{a.out}: {qid} questions, {len(lens)} paragraphs, mean {sum(lens) / len(lens):.0f} words, max {max(lens)}")
