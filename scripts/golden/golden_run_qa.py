"""Golden files of transformers' run_qa pipeline, from our own reimplementation.

What it is: a plain-Python program of ours that builds the windows ("features") of a SQuAD
file with a Hugging Face fast tokenizer, runs them through a Triton model, and writes the
files that transformers' `examples/pytorch/question-answering/run_qa.py` (with
`utils_qa.postprocess_qa_predictions`) writes: `predictions.json`,
`nbest_predictions.json` and, with `--v2`, `null_odds.json` (run_qa's `eval_` prefix left
off). It is written from the rules in our words (the spec's `run-qa.md`), not from
run_qa's code, and uses neither `datasets` nor torch. It serves two purposes: the goldens
of `bertqa eval` under run_qa's rules (`scripts/golden/golden_run_qa.sh` writes
`tests/golden/run-qa/<model>/<dataset>/`), and, with `--features-only`, the Python side of
the feature-building speed benchmark (run_qa's preparation step, batches of 1000
examples as its `Dataset.map` hands them over, one tokenizer call per batch).

What it pins: the venv of `scripts/testbed/setup_runqa_venv.sh` (transformers 4.57.6,
tokenizers 0.22.2, numpy 2.3.5, tritonclient 2.73.0); the tokenizer is whatever
`AutoTokenizer.from_pretrained(--tokenizer)` loads, and it must be a fast one. The
windows are the tokenizers library's (its stride is an overlap of context tokens, not
Google's step between window starts). Logits travel as binary float32 (FP16 outputs are
widened), so the model's values arrive bit for bit.

Where its last bits may differ from another machine's (or from run_qa's own run):
- probabilities are numpy's softmax over the n-best scores, in float32 (float64 once the
  "empty" placeholder's Python 0.0 is among them); numpy's float32 `exp` is vectorised
  (its own polynomial under AVX2 / AVX-512, the C library's `expf` elsewhere) and its sum
  is pairwise, so a probability can differ by a few float32 ulp between CPUs;
- candidate starts and ends come from `np.argsort` (not stable) on float32 logits: equal
  logits are taken in numpy's order, which can depend on numpy's version and the CPU's
  vector instructions. Everything else (logits, scores, score_diff in float32, the text
  of each span) is exact.

Where run_qa has no rule, this program says so and stops: a question whose windows the
tokenizer cannot build (no room left for the context beyond the stride, or a question
longer than the window) and duplicate question ids (run_qa would mis-group them) are
named and exit 2.

usage:
  python golden_run_qa.py DATA.json OUT_DIR --tokenizer DIR --model NAME
      (--http-port P | --grpc-port P | --url HOST:PORT --protocol http|grpc)
      [--max-seq-length 384] [--doc-stride 128] [--n-best-size 20]
      [--max-answer-length 30] [--null-score-diff-threshold 0.0] [--v2]
      [--batch-size N]
  python golden_run_qa.py DATA.json - --tokenizer DIR --features-only
      prints `features N examples M seconds S` and exits; S is the wall time of loading
      the tokenizer, reading the file and building the features (imports excluded).
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no "PyTorch not found" banner

import numpy as np  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

MAP_BATCH = 1000  # datasets' Dataset.map(batched=True) default batch size, which run_qa keeps


def fail(msg):
    print(f"golden_run_qa: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="SQuAD JSON (v1.1 or v2.0)")
    ap.add_argument("out", help="output folder (ignored with --features-only)")
    ap.add_argument("--tokenizer", required=True, help="a save_pretrained folder of a fast tokenizer")
    ap.add_argument("--model", help="the Triton model's name")
    ap.add_argument("--http-port", type=int)
    ap.add_argument("--grpc-port", type=int)
    ap.add_argument("--url", help="HOST:PORT of the server (with --protocol)")
    ap.add_argument("--protocol", choices=["http", "grpc"], default="http")
    ap.add_argument("--max-seq-length", type=int, default=384)
    ap.add_argument("--doc-stride", type=int, default=128)
    ap.add_argument("--n-best-size", type=int, default=20)
    ap.add_argument("--max-answer-length", type=int, default=30)
    ap.add_argument("--null-score-diff-threshold", type=float, default=0.0)
    ap.add_argument("--v2", action="store_true", help="version_2_with_negative")
    ap.add_argument("--batch-size", type=int,
                    help="features per request (default and cap: the model's max_batch_size; 8 "
                         "when the model declares none)")
    ap.add_argument("--features-only", action="store_true")
    a = ap.parse_args()
    if not a.features_only:
        if not a.model:
            ap.error("--model is required (unless --features-only)")
        ways = [a.http_port is not None, a.grpc_port is not None, a.url is not None]
        if sum(ways) != 1:
            ap.error("give exactly one of --http-port, --grpc-port, --url")
        if a.http_port is not None:
            a.url, a.protocol = f"127.0.0.1:{a.http_port}", "http"
        elif a.grpc_port is not None:
            a.url, a.protocol = f"127.0.0.1:{a.grpc_port}", "grpc"
    if a.batch_size is not None and a.batch_size < 1:
        ap.error("--batch-size must be at least 1")
    return a


# ---------------------------------------------------------------------------------------
# Data and tokenizer


def read_squad(path):
    """Every question of the file in file order: (id, question, context)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    examples, seen = [], set()
    for article in doc["data"]:
        for para in article["paragraphs"]:
            context = para["context"]
            for qa in para["qas"]:
                qid = qa["id"]
                if qid in seen:
                    fail(f"{path}: question id {qid!r} appears twice; run_qa keys its "
                         "windows by id and has no rule for this")
                seen.add(qid)
                examples.append((qid, qa["question"], context))
    return examples


def load_tokenizer(folder):
    tok = AutoTokenizer.from_pretrained(folder)
    if not getattr(tok, "is_fast", False):
        fail(f"{folder}: AutoTokenizer gave {type(tok).__name__}, not a fast tokenizer; run_qa "
             "needs one (offset mappings); save the folder with a tokenizer.json")
    return tok


# ---------------------------------------------------------------------------------------
# Windows: run_qa's prepare_validation_features, one call per batch of MAP_BATCH examples


def build_features(tok, examples, max_seq_length, doc_stride):
    """Returns the features in order, each a dict: example (its index in `examples`),
    input_ids, attention_mask, token_type_ids (None when the tokenizer gives none) and
    offsets (one per token; None for every token outside the context)."""
    pad_on_right = tok.padding_side == "right"
    max_len = min(max_seq_length, tok.model_max_length)
    ctx_seq = 1 if pad_on_right else 0
    features = []
    for b0 in range(0, len(examples), MAP_BATCH):
        batch = examples[b0:b0 + MAP_BATCH]
        questions = [q.lstrip() for _, q, _ in batch]
        contexts = [c for _, _, c in batch]
        first, second = (questions, contexts) if pad_on_right else (contexts, questions)
        kwargs = dict(truncation="only_second" if pad_on_right else "only_first",
                      max_length=max_len, stride=doc_stride, return_overflowing_tokens=True,
                      return_offsets_mapping=True, padding="max_length")
        try:
            enc = tok(first, second, **kwargs)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # a Rust panic arrives as pyo3's PanicException
            refused(tok, batch, first, second, kwargs, e, max_len, doc_stride)
        owner = enc["overflow_to_sample_mapping"]
        ids, mask, offsets = enc["input_ids"], enc["attention_mask"], enc["offset_mapping"]
        types = enc.get("token_type_ids")
        for i in range(len(ids)):
            seq = enc.sequence_ids(i)
            features.append({
                "example": b0 + owner[i],
                "input_ids": ids[i],
                "attention_mask": mask[i],
                "token_type_ids": types[i] if types is not None else None,
                "offsets": [o if seq[k] == ctx_seq else None for k, o in enumerate(offsets[i])],
            })
    return features


def refused(tok, batch, first, second, kwargs, err, max_len, doc_stride):
    """The tokenizer failed on a batch: names the questions it refuses, one call each
    (with Rust's panic messages kept off stderr), and exits."""
    bad = []
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        for (qid, _, _), f1, f2 in zip(batch, first, second):
            try:
                tok(f1, f2, **kwargs)
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:
                why = (str(e).splitlines() or [type(e).__name__])[0].split(" (note")[0]
                bad.append(f"{qid!r} ({why})")
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    what = "; ".join(bad[:5]) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
    fail("the tokenizer cannot build the windows of " + (what or f"a batch ({err})")
         + f"; run_qa has no rule for such a question (max_length {max_len}, stride {doc_stride})")


# ---------------------------------------------------------------------------------------
# Inference on Triton


INT_TYPES = {"INT64": np.int64, "INT32": np.int32}


def run_model(a, features):
    """The logits of every feature: two float32 arrays [features, seq]."""
    if a.protocol == "http":
        import tritonclient.http as tc
        client = tc.InferenceServerClient(a.url)
        meta = client.get_model_metadata(a.model)
        config = client.get_model_config(a.model)
    else:
        import tritonclient.grpc as tc
        client = tc.InferenceServerClient(a.url)
        meta = client.get_model_metadata(a.model, as_json=True)
        config = client.get_model_config(a.model, as_json=True)["config"]
    inputs = {t["name"]: t["datatype"] for t in meta["inputs"]}
    for name in ("input_ids", "attention_mask"):
        if name not in inputs:
            fail(f"model {a.model} has no input named {name} (inputs: {', '.join(inputs)})")
    send = ["input_ids", "attention_mask"] + (["token_type_ids"] if "token_type_ids" in inputs else [])
    for name in send:
        if inputs[name] not in INT_TYPES:
            fail(f"model {a.model}: input {name} is {inputs[name]}, not INT64 or INT32")
    outs = [t["name"] for t in meta["outputs"]]
    if "start_logits" in outs and "end_logits" in outs:
        start_name, end_name = "start_logits", "end_logits"
    elif len(outs) == 2:
        start_name, end_name = outs
    else:
        fail(f"model {a.model}: no start_logits/end_logits and not two outputs ({', '.join(outs)})")
    max_batch = int(config.get("max_batch_size", 0))
    batch = a.batch_size or (max_batch or 8)
    if max_batch:
        batch = min(batch, max_batch)

    seq = len(features[0]["input_ids"]) if features else 0
    starts = np.empty((len(features), seq), dtype=np.float32)
    ends = np.empty((len(features), seq), dtype=np.float32)
    for b0 in range(0, len(features), batch):
        chunk = features[b0:b0 + batch]
        tensors = []
        for name in send:
            if name == "token_type_ids" and chunk[0]["token_type_ids"] is None:
                # The tokenizer gives no type ids (RoBERTa, DistilBERT): the model's own
                # default, all zeros, as a transformers model fills in when they are absent.
                arr = np.zeros((len(chunk), seq), dtype=INT_TYPES[inputs[name]])
            else:
                arr = np.array([f[name] for f in chunk], dtype=INT_TYPES[inputs[name]])
            t = tc.InferInput(name, list(arr.shape), inputs[name])
            if a.protocol == "http":
                t.set_data_from_numpy(arr, binary_data=True)
            else:
                t.set_data_from_numpy(arr)
            tensors.append(t)
        if a.protocol == "http":
            wanted = [tc.InferRequestedOutput(n, binary_data=True) for n in (start_name, end_name)]
        else:
            wanted = [tc.InferRequestedOutput(n) for n in (start_name, end_name)]
        res = client.infer(a.model, tensors, outputs=wanted)
        for name, dest in ((start_name, starts), (end_name, ends)):
            got = res.as_numpy(name)
            if got is None:
                fail(f"model {a.model} did not return {name}")
            got = got.astype(np.float32).reshape(len(chunk), -1)
            if got.shape[1] != seq:
                fail(f"model {a.model}: {name} has {got.shape[1]} positions per feature, not {seq}")
            dest[b0:b0 + len(chunk)] = got
    return starts, ends


# ---------------------------------------------------------------------------------------
# Post-processing: postprocess_qa_predictions' rules (run-qa.md), one question at a time


def decode_question(qid, context, windows, starts, ends, features, a):
    """Returns (prediction text, n-best entries, score_diff or None)."""
    n_best = a.n_best_size
    cands = []  # each: [offsets, score, start_logit, end_logit]; made in window, start, end order
    null = None
    for w in windows:
        s_logits, e_logits = starts[w], ends[w]
        offs = features[w]["offsets"]
        # The null score at index 0, whatever token sits there; the smallest over the
        # windows, the first window keeping a tie.
        w_null = s_logits[0] + e_logits[0]
        if null is None or null[1] > w_null:
            null = [(0, 0), w_null, s_logits[0], e_logits[0]]
        # The n_best largest of each, over every position, by numpy's ascending argsort
        # read from its end.
        top_starts = np.argsort(s_logits)[::-1][:n_best].tolist()
        top_ends = np.argsort(e_logits)[::-1][:n_best].tolist()
        for s in top_starts:
            for e in top_ends:
                if s >= len(offs) or e >= len(offs) or offs[s] is None or offs[e] is None:
                    continue
                if e < s or e - s + 1 > a.max_answer_length:
                    continue
                cands.append([(offs[s][0], offs[e][1]), s_logits[s] + e_logits[e],
                              s_logits[s], e_logits[e]])
    if a.v2:
        cands.append(null)  # made last: sorts after a span of equal score
    # Stable sort by score, descending (ties keep the order of making), then the cut.
    kept = sorted(cands, key=lambda c: c[1], reverse=True)[:n_best]
    if a.v2 and not any(c[0] == (0, 0) for c in kept):
        kept.append(null)
    entries = [{"start_logit": c[2], "end_logit": c[3], "text": context[c[0][0]:c[0][1]],
                "score": c[1]} for c in kept]
    if not entries or (len(entries) == 1 and entries[0]["text"] == ""):
        entries.insert(0, {"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "score": 0.0})

    # Softmax in the scores' own type: float32 sums, float64 once Python's 0.0 is there.
    scores = np.array([e.pop("score") for e in entries])
    exps = np.exp(scores - np.max(scores))
    probs = exps / exps.sum()
    for e, p in zip(entries, probs):
        e["probability"] = p

    diff = None
    if not a.v2:
        answer = entries[0]["text"]
    else:
        best = next((e for e in entries if e["text"] != ""), None)
        if best is None:
            fail(f"question {qid!r}: every n-best entry has an empty text; run_qa has no rule for this")
        diff = null[1] - best["start_logit"] - best["end_logit"]  # float32 arithmetic
        answer = "" if diff > a.null_score_diff_threshold else best["text"]
    nbest = [{k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in e.items()}
             for e in entries]
    return answer, nbest, (None if diff is None else float(diff))


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=4) + "\n")


def main():
    a = parse_args()
    t0 = time.perf_counter()
    tok = load_tokenizer(a.tokenizer)
    examples = read_squad(a.data)
    features = build_features(tok, examples, a.max_seq_length, a.doc_stride)
    if a.features_only:
        print(f"features {len(features)} examples {len(examples)} seconds {time.perf_counter() - t0:.3f}")
        return

    starts, ends = run_model(a, features)
    windows_of = [[] for _ in examples]
    for i, f in enumerate(features):
        windows_of[f["example"]].append(i)
    predictions, nbest, null_odds = {}, {}, {}
    for (qid, _, context), windows in zip(examples, windows_of):
        answer, entries, diff = decode_question(qid, context, windows, starts, ends, features, a)
        predictions[qid] = answer
        nbest[qid] = entries
        if a.v2:
            null_odds[qid] = diff
    os.makedirs(a.out, exist_ok=True)
    write_json(os.path.join(a.out, "predictions.json"), predictions)
    write_json(os.path.join(a.out, "nbest_predictions.json"), nbest)
    if a.v2:
        write_json(os.path.join(a.out, "null_odds.json"), null_odds)
    print(f"{a.data}: {len(examples)} questions, {len(features)} features, model {a.model} -> {a.out}")


if __name__ == "__main__":
    main()
