"""``bertqa.Client`` against a real Triton: its answers are ``bertqa eval``'s, as a
token model, a family model with its tokenizer.json and text models; the pipeline's
call; ``ask_many``, asyncio and threads giving the same answers; ``evaluate``; the
errors of construction."""

import asyncio
import json
import os
import signal
import threading
import time
import urllib.request

import pytest

import bertqa
from conftest import ROOT, SAMPLE, run

ROBERTA = ROOT / "tests" / "fixtures" / "tokenizers" / "roberta"

# (model, its Client options): a token model, a family model by its tokenizer.json
# (run_qa's rules), a text model of each contract.
MODELS = [
    ("oracle", {}),
    ("oracle-bpe", {"tokenizer": ROBERTA}),
    ("oracle-text-logits", {}),
    ("oracle-text-answer", {}),
]


def questions():
    """(id, question, context) of every question of the sample, in order."""
    sample = json.loads(SAMPLE.read_text())
    return [
        (q["id"], q["question"], p["context"])
        for article in sample["data"]
        for p in article["paragraphs"]
        for q in p["qas"]
    ]


def eval_predictions(cargo_bin, url, model, options, out):
    args = ["eval", "--url", url, "--model", model, "--data", str(SAMPLE), "--output-dir", str(out), "--quiet"]
    if "tokenizer" in options:
        args += ["--tokenizer", str(options["tokenizer"])]
    done = run(cargo_bin, *args)
    assert done.returncode == 0, done.stderr
    return json.loads((out / "predictions.json").read_text())


@pytest.mark.parametrize("model,options", MODELS, ids=[m for m, _ in MODELS])
def test_answers_are_evals_predictions(grpc_url, cargo_bin, tmp_path, model, options):
    expected = eval_predictions(cargo_bin, grpc_url, model, options, tmp_path / "cli")
    asked = questions()
    with bertqa.Client(grpc_url, model, version_2_with_negative=True, **options) as client:
        answers = client.ask_many([(q, c) for _, q, c in asked])
        assert {i: a.text for (i, _, _), a in zip(asked, answers)} == expected
        # One at a time, the same.
        for (i, q, c) in asked[:3]:
            assert client.ask(q, c).text == expected[i]
        evaluation = client.evaluate(SAMPLE, output_dir=tmp_path / "api")
    assert evaluation.predictions == expected
    cli = json.loads((tmp_path / "cli" / "predictions.json").read_text())
    assert json.loads((tmp_path / "api" / "predictions.json").read_text()) == cli


def test_evaluate_scores_as_the_command(grpc_url, cargo_bin, tmp_path):
    out = tmp_path / "cli"
    done = run(cargo_bin, "eval", "--url", grpc_url, "--model", "oracle", "--data", str(SAMPLE),
               "--output-dir", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    client = bertqa.Client(grpc_url, "oracle")
    evaluation = client.evaluate(SAMPLE)
    assert evaluation.metrics["exact"] == 100.0
    assert evaluation.metrics == json.loads((out / "metrics.json").read_text())["metrics"]
    assert evaluation.predictions == json.loads((out / "predictions.json").read_text())
    report = evaluation.to_dict()
    assert report["questions"] == len(questions())
    assert set(report["latency_ms"]) == {"p50", "p90", "p95", "p99", "max", "mean"}
    assert report["throughput"]["questions_per_s"] > 0
    # eval --json's document: its keys in its order, and its values but for the timings,
    # where the run was written, the gates, and the resume fingerprint.
    command = json.loads((out / "metrics.json").read_text())
    assert list(report) == [*command, "predictions"]
    own = {"wall_s", "throughput", "latency_ms", "phases_s", "client", "endpoints",
           "output_dir", "files", "run", "gates", "predictions"}
    assert {k: v for k, v in report.items() if k not in own} == \
        {k: v for k, v in command.items() if k not in own}
    assert (report["gates"], report["files"], report["run"]) == ([], [], {})
    # The pool's figures cover this evaluation: one endpoint, every feature.
    [endpoint] = report["endpoints"]
    assert endpoint["features"] == report["features"] == command["features"]
    assert client.evaluate(SAMPLE).to_dict()["endpoints"][0]["requests"] == endpoint["requests"]
    # The data as a parsed dict, the same.
    assert client.evaluate(json.loads(SAMPLE.read_text())).predictions == evaluation.predictions


def test_the_pipeline_call(grpc_url):
    client = bertqa.Client(grpc_url, "oracle")
    sample = json.loads(SAMPLE.read_text())
    paragraph = sample["data"][0]["paragraphs"][0]
    context = paragraph["context"]
    answerable = [q for q in paragraph["qas"] if q["answers"]]
    question = answerable[0]["question"]

    one = client(question=question, context=context)
    assert set(one) == {"score", "start", "end", "answer"}
    assert context[one["start"]:one["end"]] == one["answer"] == answerable[0]["answers"][0]["text"]
    assert 0.0 < one["score"] <= 1.0

    # The pipeline's other ways of asking.
    assert client({"question": question, "context": context}) == one
    many = client(question=[q["question"] for q in answerable[:2]], context=context)
    assert isinstance(many, list) and len(many) == 2 and many[0] == one
    assert client([{"question": question, "context": context}] * 2) == [one, one]

    top = client(question=question, context=context, top_k=3)
    assert isinstance(top, list) and len(top) == 3
    assert top[0] == one
    assert [t["score"] for t in top] == sorted((t["score"] for t in top), reverse=True)
    for t in top:
        assert context[t["start"]:t["end"]] == t["answer"]

    # No answer, as the pipeline gives it with handle_impossible_answer.
    impossible = [q for p in sample["data"][0]["paragraphs"] for q in p["qas"] if not q["answers"]]
    p = next(p for p in sample["data"][0]["paragraphs"] if impossible[0] in p["qas"])
    none = client(question=impossible[0]["question"], context=p["context"], handle_impossible_answer=True)
    assert (none["answer"], none["start"], none["end"]) == ("", 0, 0)

    with pytest.raises(bertqa.UsageError):
        client(question=["a", "b"], context=["c"])


def test_ask_many_asyncio_and_threads_agree(grpc_url):
    client = bertqa.Client(grpc_url, "oracle")
    pairs = [(q, c) for _, q, c in questions()]
    expected = [a.text for a in client.ask_many(pairs)]

    async def gathered():
        return await asyncio.gather(*(client.ask_async(q, c) for q, c in pairs))

    assert [a.text for a in asyncio.run(gathered())] == expected

    results = [None] * 8
    errors = []

    def worker(k):
        try:
            results[k] = [client.ask(q, c).text for q, c in pairs]
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [expected] * 8


def test_answers_carry_their_span_and_candidates(grpc_url):
    client = bertqa.Client(grpc_url, "oracle")
    _, q, c = next(x for x in questions())
    a = client.ask(q, c, n_best_size=5)
    assert c[a.start_char:a.end_char] == a.text
    assert a.nbest[0].text == a.text
    assert len(a.nbest) <= 5
    assert a.probability == a.nbest[0].probability
    # An answer-contract model gives no n-best.
    text_answer = bertqa.Client(grpc_url, "oracle-text-answer").ask(q, c)
    assert text_answer.nbest is None


def test_a_dead_url_or_a_missing_model_raises_when_built(grpc_url):
    with pytest.raises(bertqa.ConnectionError):
        bertqa.Client("127.0.0.1:1", "oracle", connect_timeout_ms=500)
    with pytest.raises(bertqa.ModelError):
        bertqa.Client(grpc_url, "no-such-model")
    with pytest.raises(bertqa.UsageError):
        bertqa.Client(grpc_url, "oracle", protocol="ftp")
    client = bertqa.Client(grpc_url, "oracle")
    client.close()
    with pytest.raises(bertqa.UsageError, match="closed"):
        client.ask("q", "c")


def test_compare_takes_clients_as_the_command_takes_model_names(grpc_url, tmp_path):
    data = ROOT / "tests" / "compare-data" / "compare-1200.json"
    reference = bertqa.Client(grpc_url, "oracle")
    lossy = bertqa.Client(grpc_url, "oracle-lossy-1")
    with pytest.raises(bertqa.GateFailed) as failed:
        bertqa.compare([reference, lossy], data, fail_on_significant_drop=True, seed=3,
                       output_dir=tmp_path / "clients")
    report = failed.value.report
    assert [m["name"] for m in report["models"]] == ["oracle", "oracle-lossy-1"]
    c = report["comparisons"][0]
    assert c["exact_diff"]["ci"][1] < 0 and c["flips"]["wrong_to_right"] == 0
    assert [g["score"] for g in report["gates"] if not g["passed"]] == ["exact", "f1"]
    flips = (tmp_path / "clients" / "flips.jsonl").read_text().splitlines()
    assert len(flips) == len(report["flips"]) and json.loads(flips[0])["against"] == "oracle"
    # The command over the same models' names: the same statistics, seed for seed.
    cli = bertqa.compare(["oracle", "oracle-lossy-1"], data, url=grpc_url, seed=3)
    for key in ("exact_diff", "f1_diff", "flips", "agreement", "slices", "concentrated_in"):
        assert cli["comparisons"][0][key] == c[key], key
    # Slice by slice; wrong at random, the changes gather nowhere.
    assert isinstance(c["slices"], bertqa.Table) and len(c["slices"]) > 10
    assert c["concentrated_in"] == []
    assert all(json.loads(line)["slices"]["question_type"] for line in flips)
    # Finished runs: the command's model directories compared without a server.
    bertqa.compare(["oracle", "oracle-lossy-1"], data, url=grpc_url, output_dir=tmp_path / "cmd")
    runs = bertqa.compare(runs=[tmp_path / "cmd" / "oracle", tmp_path / "cmd" / "oracle-lossy-1"],
                          data=data, seed=3)
    assert runs["comparisons"][0]["exact_diff"] == c["exact_diff"]
    with pytest.raises(bertqa.UsageError, match="settings of the clients"):
        bertqa.compare([reference, lossy], data, batch_size=4)


def test_an_evaluation_carries_its_slices_as_a_table(grpc_url, monkeypatch):
    import sys
    import types

    evaluation = bertqa.Client(grpc_url, "oracle").evaluate(SAMPLE)
    report = evaluation.to_dict()
    assert evaluation.slices == report["slices"] and isinstance(evaluation.slices, bertqa.Table)
    dimensions = {s["slice"].split(":")[0] for s in evaluation.slices}
    assert {"question_type", "answerable", "context_windows", "margin"} <= dimensions
    assert sum(s["questions"] for s in evaluation.slices if s["slice"].startswith("question_type:")) \
        == report["questions"]
    # The oracle answers every question: no slice is weak.
    assert evaluation.weak_slices == report["weak_slices"] == []
    assert evaluation.slices_not_computed == report["slices_not_computed"]
    # pandas is optional: without it, a clear error; with it, a DataFrame of the rows.
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        evaluation.slices.to_pandas()
    pandas = types.ModuleType("pandas")
    pandas.DataFrame = lambda rows: ("frame", rows)
    monkeypatch.setitem(sys.modules, "pandas", pandas)
    assert evaluation.slices.to_pandas() == ("frame", list(evaluation.slices))


# Short perf windows: a level ends after a few requests.
PERF_WINDOWS = dict(measurement_request_count=16, stability_percentage=100, max_trials=3, no_metrics=True)


def test_perf_on_a_client_sweeps_as_the_command_does(grpc_url, cargo_bin):
    with bertqa.Client(grpc_url, "oracle", batch_size=2, doc_stride=96) as client:
        report = client.perf(SAMPLE, concurrency_range="1:2", **PERF_WINDOWS)
    done = run(cargo_bin, "perf", "--url", grpc_url, "--model", "oracle", "--data", str(SAMPLE),
               "--batch-size", "2", "--doc-stride", "96", "--concurrency-range", "1:2",
               "--measurement-request-count", "16", "--stability-percentage", "100",
               "--max-trials", "3", "--no-metrics", "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    command = json.loads(done.stdout)
    # The same sweep of the same windows; only the measurements differ.
    same = ("schema", "model", "data", "features", "batch_size", "padding", "inputs", "mode", "measurement")
    assert {k: report[k] for k in same} == {k: command[k] for k in same}
    assert report["batch_size"] == 2
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 2]
    assert all(lv["throughput"]["requests_per_s"] > 0 for lv in report["levels"])


def test_ctrl_c_stops_a_clients_sweep(grpc_url, ctrl_c):
    # Levels of 2 s each up to 64 in flight: a minute's sweep, stopped after 2 s.
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    with bertqa.Client(grpc_url, "oracle-slow", batch_size=1) as client:
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.perf(SAMPLE, concurrency_range="1:64", measurement_interval_ms=2000, no_metrics=True)
        assert time.monotonic() - started < 10


def _served_config(http_url: str, model: str) -> dict:
    """The configuration the server holds for ``model`` (Triton's HTTP config endpoint)."""
    with urllib.request.urlopen(f"http://{http_url}/v2/models/{model}/config", timeout=30) as r:
        return json.loads(r.read())


def test_tune_on_a_client_searches_and_puts_the_original_back(grpc_url, http_url, tmp_path):
    before = _served_config(http_url, "tune-fixed-cost")
    assert "dynamic_batching" not in before
    with bertqa.Client(grpc_url, "tune-fixed-cost") as client:
        report = client.tune(
            SAMPLE, control_url=http_url, output_dir=tmp_path, max_batch_sizes="8",
            queue_delays_us="0,2000", instances="1", preferred_batch_sizes="none",
            latency_threshold=150, concurrency="4", remeasure=0, warmup=2,
            measurement_request_count=24, stability_percentage=50, max_trials=4,
        )
    assert report == json.loads((tmp_path / "tune.json").read_text())
    assert report["model"] == "tune-fixed-cost" and report["restored"] is True
    assert len(report["candidates"]) >= 2 and report["best"] is not None
    # A candidate with dynamic batching was loaded, and the original is back.
    assert any(c["config"]["dynamic_batching"] for c in report["candidates"]), report["candidates"]
    assert _served_config(http_url, "tune-fixed-cost") == before
    with bertqa.Client(grpc_url, "tune-fixed-cost") as client:
        with pytest.raises(bertqa.UsageError, match="has no option 'vocab'"):
            client.tune(SAMPLE, output_dir=tmp_path / "other", vocab="v.txt")


def test_tensor_names_and_padding_are_settings_of_the_client(grpc_url):
    context = questions()[0][2]
    question = questions()[0][1]
    inferred = bertqa.Client(grpc_url, "oracle").ask(question, context)
    named = bertqa.Client(grpc_url, "oracle", input_ids="input__0", segment_ids="input__1",
                          input_mask="input__2", start_logits="output__0", end_logits="output__1",
                          fixed_seq_len=True, retry_max_backoff_ms=50, retry_model_errors=True)
    answer = named.ask(question, context)
    assert (answer.text, answer.start_char, answer.probability) == \
        (inferred.text, inferred.start_char, inferred.probability)
    with pytest.raises(bertqa.ModelError, match="nope"):
        bertqa.Client(grpc_url, "oracle", input_ids="nope")
    with pytest.raises(bertqa.UsageError, match="give one"):
        bertqa.Client(grpc_url, "oracle", fixed_seq_len=True, dynamic_seq_len=True)


def test_a_placeholder_answer_says_so_and_a_wrong_argument_is_named(grpc_url):
    client = bertqa.Client(grpc_url, "oracle")
    context = "The lighthouse was built in 1874 by Miriam Holt."
    # No span is short enough: the reference's "empty", marked as its placeholder.
    none = client.ask("Who built it?", context, max_answer_length=0)
    assert (none.text, none.placeholder) == ("empty", True)
    assert "placeholder=True" in repr(none)
    # A span of the context is no placeholder.
    _, question, context = questions()[0]
    span = client.ask(question, context)
    assert span.start_char is not None
    assert span.placeholder is False and "placeholder" not in repr(span)
    with pytest.raises(TypeError, match="^question must be a str, not int$"):
        client.ask(5, context)
    with pytest.raises(TypeError, match="^context must be a str, not NoneType$"):
        client.ask("Who built it?", None)
