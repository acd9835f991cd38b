"""Writes a SQuAD JSON file in the other formats bertqa reads, as their own tools write
them, for tests and benchmarks (never with bertqa itself):

    python convert.py SQUAD.json OUT_DIR [--repeat N]

OUT_DIR/rows.jsonl        Hugging Face rows, as `datasets.Dataset.to_json` writes them
OUT_DIR/rows.jsonl.gz     the same, gzip-compressed
OUT_DIR/rows.parquet      the same rows as Parquet (pyarrow, snappy: the hub's default)
OUT_DIR/rows-1.parquet,   the rows split in two shards, as the hub stores larger splits
  rows-2.parquet
OUT_DIR/mrqa.jsonl.gz     the answerable questions as MRQA JSON Lines (a header line, one
                          context per line, char_spans with inclusive ends), gzipped
OUT_DIR/answerable.json   the answerable questions as SQuAD JSON (what the MRQA file
                          holds, for comparison)
OUT_DIR/squad.json        the rows as SQuAD JSON again (with --repeat, the repeated file)

--repeat N writes every question N times (ids suffixed `-rK` from the second copy on),
for reading benchmarks.
"""
import argparse
import gzip
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq


def rows_of(squad, repeat):
    for k in range(repeat):
        suffix = "" if k == 0 else f"-r{k}"
        for article in squad["data"]:
            for p in article["paragraphs"]:
                for qa in p["qas"]:
                    answers = [] if qa.get("is_impossible") else qa.get("answers", [])
                    yield {
                        "id": qa["id"] + suffix,
                        "title": article.get("title", ""),
                        "context": p["context"],
                        "question": qa["question"],
                        "answers": {
                            "text": [a["text"] for a in answers],
                            # An unknown offset (null in some public files) as 0,
                            # which is how bertqa's SQuAD reader keeps it.
                            "answer_start": [a.get("answer_start") or 0 for a in answers],
                        },
                    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("squad")
    ap.add_argument("out")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    with open(args.squad, encoding="utf-8") as f:
        squad = json.load(f)
    os.makedirs(args.out, exist_ok=True)
    rows = list(rows_of(squad, args.repeat))
    # to_json: one object per line, non-ASCII kept as is.
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    with open(os.path.join(args.out, "rows.jsonl"), "w", encoding="utf-8") as f:
        f.write(lines)
    with gzip.open(os.path.join(args.out, "rows.jsonl.gz"), "wt", encoding="utf-8") as f:
        f.write(lines)
    schema = pa.schema([
        ("id", pa.string()), ("title", pa.string()), ("context", pa.string()),
        ("question", pa.string()),
        ("answers", pa.struct([("text", pa.list_(pa.string())),
                               ("answer_start", pa.list_(pa.int32()))])),
    ])
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, os.path.join(args.out, "rows.parquet"), row_group_size=1000)
    half = len(rows) // 2
    pq.write_table(table.slice(0, half), os.path.join(args.out, "rows-1.parquet"))
    pq.write_table(table.slice(half), os.path.join(args.out, "rows-2.parquet"))
    # MRQA: the answerable rows, one context per line (a run of rows of one context).
    answerable = {"version": "1.1", "data": []}
    with gzip.open(os.path.join(args.out, "mrqa.jsonl.gz"), "wt", encoding="utf-8") as f:
        f.write(json.dumps({"header": {"dataset": os.path.basename(args.squad), "split": "dev"}}) + "\n")
        line = None
        for r in rows:
            a = r["answers"]
            if not a["text"]:
                continue
            if line is None or line["context"] != r["context"]:
                if line is not None:
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
                line = {"id": "", "context": r["context"], "qas": []}
                if not answerable["data"] or answerable["data"][-1]["title"] != r["title"]:
                    answerable["data"].append({"title": r["title"], "paragraphs": []})
                answerable["data"][-1]["paragraphs"].append({"context": r["context"], "qas": []})
            texts, detected = [], {}
            for text, start in zip(a["text"], a["answer_start"]):
                if text not in texts:
                    texts.append(text)
                d = detected.setdefault(text, {"text": text, "char_spans": [], "token_spans": []})
                span = [start, start + len(text) - 1]
                if span not in d["char_spans"]:
                    d["char_spans"].append(span)
            line["qas"].append({
                "id": r["id"], "qid": r["id"], "question": r["question"],
                "answers": texts, "detected_answers": list(detected.values()),
            })
            answerable["data"][-1]["paragraphs"][-1]["qas"].append({
                "id": r["id"], "question": r["question"],
                "answers": [{"text": t, "answer_start": s} for t, s in zip(a["text"], a["answer_start"])],
            })
        if line is not None:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    with open(os.path.join(args.out, "answerable.json"), "w", encoding="utf-8") as f:
        json.dump(answerable, f, ensure_ascii=False)
    # The rows as SQuAD JSON: one article per run of one title, one paragraph per run
    # of one context.
    data = []
    for r in rows:
        if not data or data[-1]["title"] != r["title"]:
            data.append({"title": r["title"], "paragraphs": []})
        paras = data[-1]["paragraphs"]
        if not paras or paras[-1]["context"] != r["context"]:
            paras.append({"context": r["context"], "qas": []})
        a = r["answers"]
        paras[-1]["qas"].append({
            "id": r["id"], "question": r["question"], "is_impossible": not a["text"],
            "answers": [{"text": t, "answer_start": s} for t, s in zip(a["text"], a["answer_start"])],
        })
    with open(os.path.join(args.out, "squad.json"), "w", encoding="utf-8") as f:
        json.dump({"version": squad.get("version", ""), "data": data}, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
