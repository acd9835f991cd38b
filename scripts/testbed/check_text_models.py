"""Checks the test bed's text models (models/repo/qa-text-*, oracle-text-*,
fault-text-*) on a running Triton, over HTTP/JSON (BYTES as JSON strings).

Usage: TRITON_PYTHON check_text_models.py --url http://127.0.0.1:PORT --bertqa BIN
       [--data FILE]... (default: data/sample-squad-v2.json and tests/fixtures/**)
The server must have loaded: qa-text-tokenizer, qa-text-tokenizer-stride64,
qa-text-logits, qa-text-logits-stride64, qa-text-answer, qa-text-answer-bls,
qa-text-answer-no-null, oracle-text-logits, oracle-text-answer, tiny-bert,
oracle-nobatch and the three fault-text-* models (with what they step through). Prints one line per failed check and exits 1 on any.

For every question of the files, plus a few of the sample's questions about a context
made longer than 8 windows from its paragraphs:
- each tokenizer's windows (ids, segments, mask) equal `bertqa features`' (stride 128
  and 64), window for window;
- the offsets are [-1, -1] exactly outside the context, each context token's span lies
  in the run_squad word bertqa maps it to, and its text, normalized as the reference's
  BasicTokenizer does, is the piece without `##` ([UNK] and kept special tokens aside);
- qa-text-logits / oracle-text-logits return the tokenizer's offsets and the logits of
  tiny-bert / oracle-nobatch on those windows (within 1e-5); the stride-64 ensemble has
  other windows on the long context;
- qa-text-answer: the answer is the context at [answer_start, answer_end), its score is
  the start + end logit of a span with those offsets in qa-text-logits' output, the
  no-answer score is the smallest [CLS] start + end logit; qa-text-answer-bls answers a
  batch of two as qa-text-answer does; qa-text-answer-no-null gives qa-text-answer's
  outputs but the no-answer score, which its metadata does not list;
- oracle-text-answer, on the sample file and the long context: an answerable question
  gets a gold answer scored above the no-answer score, an unanswerable one the opposite;
- the fault models show their fault (raw bytes read as binary data).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import unicodedata
import urllib.error
import urllib.request

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SEPARATORS = " \t\r\n\u202f"
SPECIALS = ("[SEP]", "[PAD]", "[CLS]", "[MASK]")
FAILURES = []


class Refused(Exception):
    """A request the server answered with an error."""


def fail(msg):
    FAILURES.append(msg)
    print("FAIL:", msg, flush=True)


ANSWER_OUTPUTS = ("answer", "score", "no_answer_score", "answer_start", "answer_end")
# qa-text-answer-no-null's: the answer contract without a no-answer output.
NO_NULL_OUTPUTS = tuple(o for o in ANSWER_OUTPUTS if o != "no_answer_score")


def infer(url, model, inputs, binary=False, outputs=ANSWER_OUTPUTS):
    """inputs: [(name, datatype, shape, flat data)] -> {output: (datatype, shape, data)};
    with `binary`, the answer contract's `outputs` are asked for and `answer` comes back
    as raw bytes (Triton's binary data extension: a 4-byte length before each element)."""
    body = {"inputs": [{"name": n, "datatype": d, "shape": s, "data": x} for n, d, s, x in inputs]}
    if binary:
        body["outputs"] = [{"name": o, "parameters": {"binary_data": o == "answer"}} for o in outputs]
    req = urllib.request.Request(f"{url}/v2/models/{model}/infer", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            raw = r.read()
            head = int(r.headers.get("Inference-Header-Content-Length") or len(raw))
    except urllib.error.HTTPError as e:
        raise Refused(f"{model}: HTTP {e.code}: {e.read().decode(errors='replace')[:300]}") from None
    doc = json.loads(raw[:head])
    out, pos = {}, head
    for o in doc["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            out[o["name"]] = (o["datatype"], o["shape"], raw[pos:pos + size])
            pos += size
        else:
            out[o["name"]] = (o["datatype"], o["shape"], o["data"])
    return out


def arr(out, name, dtype):
    _, shape, data = out[name]
    return np.asarray(data, dtype).reshape(shape)


def text_inputs(question, context, batch=None):
    """The two BYTES inputs, [1]; with `batch`, [batch, 1] of the same pair."""
    shape, n = ([batch, 1], batch) if batch else ([1], 1)
    return [("question", "BYTES", shape, [question] * n), ("context", "BYTES", shape, [context] * n)]


def words(context):
    """char index -> run_squad word index (-1 on separators before the first word)."""
    idx, w, prev_sep = [], -1, True
    for c in context:
        if c in SEPARATORS:
            prev_sep = True
        else:
            if prev_sep:
                w += 1
            prev_sep = False
        idx.append(w)
    return idx


def normalize(s):
    """The reference's BasicTokenizer on a span, without splitting; final sigma folded."""
    s = "".join(c for c in s if not (c not in "\t\n\r" and (c in "\0\ufffd" or unicodedata.category(c)[0] == "C")))
    s = unicodedata.normalize("NFD", s.lower())
    return "".join(c for c in s if unicodedata.category(c) != "Mn").replace("ς", "σ")


def examples(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return [(qa, p["context"]) for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]


def features(bertqa, path, stride):
    """example index -> its features from `bertqa features`."""
    out = subprocess.run([bertqa, "features", "--data", path, "--doc-stride", str(stride)],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    by = {}
    for line in out.stdout.splitlines():
        f = json.loads(line)
        by.setdefault(f["example_index"], []).append(f)
    return by


# Questions asked about the long context: every one is sent through each model once per
# window (22 and 42 of them), so a few answerable and unanswerable ones cover it.
LONG_ANSWERABLE, LONG_UNANSWERABLE = 2, 2


def long_file(tmp):
    """A SQuAD file whose one context (the sample file's paragraphs, repeated) makes more
    than 8 windows, with the first few answerable and unanswerable questions of the
    sample (LONG_ANSWERABLE, LONG_UNANSWERABLE) and their answers' positions in it."""
    with open(os.path.join(ROOT, "data", "sample-squad-v2.json"), encoding="utf-8") as f:
        data = json.load(f)
    paras = [p for a in data["data"] for p in a["paragraphs"]]
    context, qas = "", []
    for rep in range(3):
        for p in paras:
            base = len(context)
            context += p["context"] + "\n\n"
            if rep == 0:
                for qa in p["qas"]:
                    impossible = bool(qa.get("is_impossible"))
                    if sum(bool(q.get("is_impossible")) == impossible for q in qas) >= (
                            LONG_UNANSWERABLE if impossible else LONG_ANSWERABLE):
                        continue
                    qa = dict(qa, id=qa["id"] + "-long")
                    for key in ("answers", "plausible_answers"):
                        if key in qa:
                            qa[key] = [dict(a, answer_start=a["answer_start"] + base) for a in qa[key]]
                    qas.append(qa)
    path = os.path.join(tmp, "long.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "v2.0", "data": [{"title": "long", "paragraphs": [{"context": context, "qas": qas}]}]}, f)
    return path


def check_tokenizer(url, model, label, ctx, feats, out):
    ids, seg, mask = (arr(out, n, np.int64) for n in ("input_ids", "segment_ids", "input_mask"))
    offsets = arr(out, "offsets", np.int64)
    if len(feats) != ids.shape[0]:
        fail(f"{model} {label}: {ids.shape[0]} windows, bertqa features {len(feats)}")
        return False
    wmap = words(ctx)
    for w, f in enumerate(feats):
        for name, got in (("input_ids", ids), ("segment_ids", seg), ("input_mask", mask)):
            if f[name] != got[w].tolist():
                k = next(i for i, (a, b) in enumerate(zip(f[name], got[w].tolist())) if a != b)
                fail(f"{model} {label} window {w}: {name} differ from bertqa features' first at position {k}")
                return False
        ctx_pos = {int(k): v for k, v in f["token_to_orig_map"].items()}
        for p in range(ids.shape[1]):
            lo, hi = offsets[w, p]
            if p not in ctx_pos:
                if (lo, hi) != (-1, -1):
                    fail(f"{model} {label} window {w} position {p}: offsets {lo, hi} outside the context")
                    return False
            elif not (0 <= lo < hi <= len(ctx)) or wmap[lo] != ctx_pos[p] or wmap[hi - 1] != ctx_pos[p]:
                fail(f"{model} {label} window {w} position {p}: offsets {lo, hi} not in word {ctx_pos[p]}")
                return False
        # Text: consecutive pieces whose spans overlap form a group (one character can
        # make several pieces: NFD turns a Hangul syllable into three jamo); the group's
        # span, normalized, must be its pieces joined (part of it at the window's two
        # edges, where a window may begin or end inside a character's pieces).
        groups = []
        for p in sorted(ctx_pos):
            lo, hi = (int(x) for x in offsets[w, p])
            if groups and lo < groups[-1][1]:
                groups[-1][1] = max(groups[-1][1], hi)
                groups[-1][2].append(f["tokens"][p])
            else:
                groups.append([lo, hi, [f["tokens"][p]]])
        for g, (lo, hi, pieces) in enumerate(groups):
            if "[UNK]" in pieces:
                continue
            span = ctx[lo:hi]
            want = span if pieces[0] in SPECIALS else normalize(span)
            got = "".join(x.removeprefix("##") for x in pieces).replace("ς", "σ")
            edge = g in (0, len(groups) - 1)
            if not (want == got or edge and got in want):
                fail(f"{model} {label} window {w}: the span [{lo}, {hi}) {span!r} is not the pieces {pieces}")
                return False
    return True


def close(a, b):
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= 1e-5))


def model_logits(url, model, batch, ids, seg, mask):
    starts, ends = [], []
    step = batch or max(1, ids.shape[0])
    for lo in range(0, ids.shape[0], step):
        chunk = [(f"input__{i}", "INT64", list(t[lo:lo + step].shape), t[lo:lo + step].reshape(-1).tolist())
                 for i, t in enumerate((ids, seg, mask))]
        out = infer(url, model, chunk)
        starts.append(arr(out, "output__0", np.float32))
        ends.append(arr(out, "output__1", np.float32))
    if not starts:
        return np.zeros((0, 384), np.float32), np.zeros((0, 384), np.float32)
    return np.concatenate(starts), np.concatenate(ends)


def check_question(args, qa, ctx, feats128, feats64, label, oracle_exact):
    q = qa["question"]
    tok = infer(args.url, "qa-text-tokenizer", text_inputs(q, ctx))
    check_tokenizer(args.url, "qa-text-tokenizer", label, ctx, feats128, tok)
    tok64 = infer(args.url, "qa-text-tokenizer-stride64", text_inputs(q, ctx))
    check_tokenizer(args.url, "qa-text-tokenizer-stride64", label, ctx, feats64, tok64)
    ids, seg, mask = (arr(tok, n, np.int64) for n in ("input_ids", "segment_ids", "input_mask"))
    offsets = arr(tok, "offsets", np.int64)
    logits = {}
    for ens, model, batch in (("qa-text-logits", "tiny-bert", 8), ("oracle-text-logits", "oracle-nobatch", 0)):
        out = infer(args.url, ens, text_inputs(q, ctx))
        start, end = arr(out, "start_logits", np.float32), arr(out, "end_logits", np.float32)
        want_s, want_e = model_logits(args.url, model, batch, ids, seg, mask)
        if not (close(start, want_s) and close(end, want_e)):
            fail(f"{ens} {label}: logits differ from {model}'s on the tokenizer's windows")
        if not np.array_equal(arr(out, "offsets", np.int64), offsets):
            fail(f"{ens} {label}: offsets differ from qa-text-tokenizer's")
        logits[ens] = (start, end)
    answers = {}
    for ens, logit_model in (("qa-text-answer", "qa-text-logits"), ("oracle-text-answer", "oracle-text-logits")):
        out = infer(args.url, ens, text_inputs(q, ctx), binary=True)
        answers[ens] = out
        answer = out["answer"][2][4:].decode("utf-8")  # one element: 4-byte length, bytes
        lo, hi = int(arr(out, "answer_start", np.int64)[0]), int(arr(out, "answer_end", np.int64)[0])
        score, null = float(arr(out, "score", np.float32)[0]), float(arr(out, "no_answer_score", np.float32)[0])
        start, end = logits[logit_model]
        want_null = min((float(start[w, 0]) + float(end[w, 0]) for w in range(start.shape[0])), default=0.0)
        if abs(null - want_null) > 1e-5:
            fail(f"{ens} {label}: no_answer_score {null}, smallest [CLS] score {want_null}")
        placeholder = (answer, lo, hi, score) == ("empty", 0, 0, 0.0)  # no valid span
        # The context at the span, its whitespace runs one space (run_squad's words).
        spaced = "".join(" " if c in SEPARATORS else c for c in ctx[lo:hi])
        cut = " ".join(w for w in spaced.split(" ") if w)
        if answer != cut and not placeholder:
            fail(f"{ens} {label}: answer {answer!r} is not the context's words at [{lo}, {hi}): {cut!r}")
        if answer and not placeholder:
            spans = [float(start[w, s]) + float(end[w, e]) for w in range(start.shape[0])
                     for s in np.nonzero(offsets[w, :, 0] == lo)[0] for e in np.nonzero(offsets[w, :, 1] == hi)[0]
                     if s <= e < s + 30]
            if not any(abs(score - x) <= 1e-5 for x in spans):
                fail(f"{ens} {label}: score {score} is no span's logits at [{lo}, {hi})")
        if ens == "oracle-text-answer" and oracle_exact:
            golds = [a["text"] for a in qa.get("answers", [])]
            if qa.get("is_impossible") or not golds:
                if not null > score:
                    fail(f"{ens} {label}: unanswerable, yet score {score} >= no-answer {null}")
            elif answer not in golds:
                fail(f"{ens} {label}: answer {answer!r}, gold {golds}")
            elif answer in golds and not score > null:
                fail(f"{ens} {label}: gold answer scored {score} <= no-answer {null}")
    # The BLS model answers a batch of two (the question twice) as the ensemble does.
    bls = infer(args.url, "qa-text-answer-bls", text_inputs(q, ctx, batch=2), binary=True)
    want = answers["qa-text-answer"]
    for name in ("answer", "score", "no_answer_score", "answer_start", "answer_end"):
        if bls[name][1] != [2, 1] or bls[name][2] != want[name][2] * 2:
            fail(f"qa-text-answer-bls {label}: {name} {bls[name][1:]} is not qa-text-answer's twice")
    # The ensemble without a no-answer output gives the same span.
    nonull = infer(args.url, "qa-text-answer-no-null", text_inputs(q, ctx), binary=True, outputs=NO_NULL_OUTPUTS)
    for name in NO_NULL_OUTPUTS:
        if nonull[name][1:] != want[name][1:]:
            fail(f"qa-text-answer-no-null {label}: {name} {nonull[name][1:]} is not qa-text-answer's")
    return ids.shape[0], arr(tok64, "input_ids", np.int64).shape[0]


def check_no_null(url):
    """qa-text-answer-no-null declares the answer contract's outputs but the no-answer
    one, and answers without it when asked for every output."""
    with urllib.request.urlopen(f"{url}/v2/models/qa-text-answer-no-null", timeout=60) as r:
        declared = sorted(o["name"] for o in json.load(r)["outputs"])
    if declared != sorted(NO_NULL_OUTPUTS):
        fail(f"qa-text-answer-no-null: declares {declared}, want {sorted(NO_NULL_OUTPUTS)}")
    out = infer(url, "qa-text-answer-no-null", text_inputs("Who?", "Ada wrote it."))
    if sorted(out) != sorted(NO_NULL_OUTPUTS):
        fail(f"qa-text-answer-no-null: outputs {sorted(out)}, want {sorted(NO_NULL_OUTPUTS)}")


def check_faults(url):
    inputs = text_inputs("Who?", "Ada wrote it.")
    out = infer(url, "fault-text-non-utf8-answer", inputs, binary=True)
    raw = out["answer"][2][4:]
    try:
        raw.decode("utf-8")
        fail(f"fault-text-non-utf8-answer: answer {raw!r} is valid UTF-8")
    except UnicodeDecodeError:
        pass
    out = infer(url, "fault-text-missing-output", inputs)
    if "answer" in out or "score" not in out:
        fail(f"fault-text-missing-output: outputs {sorted(out)}, want all but answer")
    out = infer(url, "fault-text-wrong-count", inputs)
    if out["answer"][1] != [2]:
        fail(f"fault-text-wrong-count: answer shape {out['answer'][1]}, want [2]")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--bertqa", required=True)
    ap.add_argument("--data", action="append")
    args = ap.parse_args()
    sample = os.path.join(ROOT, "data", "sample-squad-v2.json")
    files = args.data or [sample] + sorted(
        glob.glob(os.path.join(ROOT, "tests", "fixtures", "**", "*.json"), recursive=True))
    with tempfile.TemporaryDirectory() as tmp:
        long = long_file(tmp)
        # The oracle's gold answers are checked where it is exact: there its own
        # tokenizer (transformers' slow one) agrees with ours on every question and gold
        # answer; on unicode.json it does not, nor can it tell empty questions apart.
        oracle_exact = {sample, long}
        files = files + [long]
        most = (0, 0)
        for path in files:
            try:
                exs = examples(path)
            except (ValueError, KeyError, TypeError):
                continue  # not a SQuAD file
            f128, f64 = features(args.bertqa, path, 128), features(args.bertqa, path, 64)
            for i, (qa, ctx) in enumerate(exs):
                label = f"{os.path.relpath(path, ROOT) if path.startswith(ROOT) else 'long context'} {qa['id']}"
                try:
                    n128, n64 = check_question(args, qa, ctx, f128.get(i, []), f64.get(i, []), label,
                                              path in oracle_exact)
                    most = max(most, (n128, n64))
                except Refused as e:
                    fail(f"{label}: {e}")
            print(f"checked {path}: {len(exs)} questions", flush=True)
    if most[0] <= 8:
        fail(f"no context made more than 8 windows (most: {most[0]})")
    if most[1] == most[0]:
        fail(f"the stride-64 tokenizer made as many windows as stride 128 ({most[0]}) on the longest context")
    try:
        check_no_null(args.url)
        check_faults(args.url)
    except Refused as e:
        fail(str(e))
    print(f"{len(FAILURES)} failure(s); longest context: {most[0]} windows at stride 128, {most[1]} at 64")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
