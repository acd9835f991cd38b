"""The Python API against a real Triton: the command's numbers and files, the data
forms, the official scores, the exceptions (each from a real cause), Ctrl-C, the GIL,
and the documentation of every option."""

import builtins
import filecmp
import inspect
import json
import os
import signal
import threading
import time

import pytest

import bertqa
from bertqa import _api, _stubs
from conftest import ROOT, SAMPLE, run

# What differs between two runs of the same evaluation: timings, and where it ran.
VOLATILE = {"wall_s", "throughput", "latency_ms", "phases_s", "client", "endpoints", "output_dir"}
DECODE = ROOT / "tests" / "fixtures" / "decode"
GOLDEN = ROOT / "tests" / "golden" / "decode"


def stable(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in VOLATILE}


@pytest.mark.parametrize("model", ["oracle", "oracle-text-logits"])
def test_evaluate_equals_the_commands_metrics_and_files(endpoint, model, cargo_bin, tmp_path):
    protocol, url = endpoint
    cli_dir, api_dir = tmp_path / "cli", tmp_path / "api"
    done = run(cargo_bin, "eval", "--url", url, "--protocol", protocol, "--model", model,
               "--data", str(SAMPLE), "--output-dir", str(cli_dir), "--quiet")
    assert done.returncode == 0, done.stderr
    report = bertqa.evaluate(url, model, str(SAMPLE), protocol=protocol, output_dir=api_dir)
    cli_metrics = json.loads((cli_dir / "metrics.json").read_text())
    assert report["metrics"]["exact"] == 100.0
    assert report["metrics"] == cli_metrics["metrics"]
    assert stable(report) == dict(stable(cli_metrics), predictions=report["predictions"])
    assert report["predictions"] == json.loads((cli_dir / "predictions.json").read_text())
    # The dict is the document the command writes (and prints with --json).
    api_metrics = json.loads((api_dir / "metrics.json").read_text())
    assert {k: v for k, v in report.items() if k != "predictions"} == api_metrics
    files = sorted(p.name for p in cli_dir.iterdir() if p.name != "metrics.json")
    assert files == sorted(p.name for p in api_dir.iterdir() if p.name != "metrics.json")
    assert "predictions.json" in files
    match, mismatch, errors = filecmp.cmpfiles(cli_dir, api_dir, files, shallow=False)
    assert (mismatch, errors) == ([], []), (mismatch, errors)


def test_data_as_a_dict_or_rows_answers_as_the_file(grpc_url):
    by_path = bertqa.evaluate(grpc_url, "oracle", SAMPLE)
    squad = json.loads(SAMPLE.read_text())
    by_dict = bertqa.evaluate(grpc_url, "oracle", squad)
    rows = []
    for article in squad["data"]:
        for p in article["paragraphs"]:
            for q in p["qas"]:
                rows.append({
                    "id": q["id"],
                    "title": article.get("title", ""),
                    "context": p["context"],
                    "question": q["question"],
                    "answers": {
                        "text": [a["text"] for a in q["answers"]],
                        "answer_start": [a["answer_start"] for a in q["answers"]],
                    },
                })
    by_rows = bertqa.evaluate(grpc_url, "oracle", rows, version_2_with_negative=True)
    assert by_path["predictions"] == by_dict["predictions"] == by_rows["predictions"]
    assert by_path["metrics"] == by_dict["metrics"] == by_rows["metrics"]
    assert by_path["metrics"]["exact"] == 100.0


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_score_equals_the_official_script(version):
    cases = json.loads((GOLDEN / version / "scores.json").read_text())
    assert len(cases) >= 2
    for case in cases:
        options = {"na_prob_thresh": case["na_prob_thresh"]}
        if case["version"] == "v2.0":
            options["version_2_with_negative"] = True
        na = case["na_prob_file"]
        report = bertqa.score(
            DECODE / f"squad_{version}.json",
            GOLDEN / version / case["predictions"],
            GOLDEN / version / na if na else None,
            **options,
        )
        assert report["metrics"] == pytest.approx(case["metrics"], abs=1e-9), case["name"]
        assert list(report["metrics"]) == list(case["metrics"]), case["name"]


def test_score_takes_predictions_as_a_dict():
    case = json.loads((GOLDEN / "v1" / "scores.json").read_text())[0]
    predictions = json.loads((GOLDEN / "v1" / case["predictions"]).read_text())
    by_dict = bertqa.score(DECODE / "squad_v1.json", predictions)
    by_path = bertqa.score(DECODE / "squad_v1.json", GOLDEN / "v1" / case["predictions"])
    assert by_dict == by_path


def test_ask_answers_each_question(endpoint, cargo_bin):
    protocol, url = endpoint
    sample = json.loads(SAMPLE.read_text())
    paragraph = sample["data"][0]["paragraphs"][0]
    answerable = [q for q in paragraph["qas"] if q["answers"]][:2]
    questions = [q["question"] for q in answerable]
    answers = bertqa.ask(url, "oracle", questions, paragraph["context"], protocol=protocol)
    assert [a["answer"] for a in answers] == [q["answers"][0]["text"] for q in answerable]
    for a in answers:
        assert a["probability"] > 0.5
        assert paragraph["context"][a["start_char"]:a["end_char"]] == a["answer"]
    args = ["ask", "--url", url, "--protocol", protocol, "--model", "oracle", "--json",
            "--context", paragraph["context"]]
    for q in questions:
        args += ["--question", q]
    done = run(cargo_bin, *args)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answers"] == answers
    one = bertqa.ask(url, "oracle", questions[0], paragraph["context"], protocol=protocol, n_best=3)
    assert len(one) == 1 and len(one[0]["nbest"]) <= 3 and one[0]["answer"] == answers[0]["answer"]


def test_ask_of_an_answer_model_gives_the_commands_numbers(grpc_url, cargo_bin):
    # The answer contract's scores are single precision: the dict holds them as the
    # command prints them.
    paragraph = json.loads(SAMPLE.read_text())["data"][0]["paragraphs"][0]
    question = paragraph["qas"][0]["question"]
    answers = bertqa.ask(grpc_url, "oracle-text-answer", question, paragraph["context"])
    done = run(cargo_bin, "ask", "--url", grpc_url, "--model", "oracle-text-answer", "--json",
               "--context", paragraph["context"], "--question", question)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answers"] == answers


def test_compare_returns_the_commands_report(grpc_url, tmp_path):
    report = bertqa.compare(["oracle", "oracle-nobatch"], SAMPLE, url=grpc_url, output_dir=tmp_path)
    assert report == json.loads((tmp_path / "compare.json").read_text())
    assert [m["name"] for m in report["models"]] == ["oracle", "oracle-nobatch"]
    assert [m["metrics"]["exact"] for m in report["models"]] == [100.0, 100.0]


def _cli_error(cargo_bin, *args):
    done = run(cargo_bin, *args)
    assert done.returncode == 2
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: "), done.stderr
    return line[len("error: "):]


def test_a_dead_url_raises_connection_error(cargo_bin):
    with pytest.raises(bertqa.ConnectionError) as e:
        bertqa.evaluate("127.0.0.1:1", "oracle", SAMPLE, connect_timeout_ms=300)
    assert isinstance(e.value, bertqa.Error) and e.value.exit_code == 2
    # Python's own ConnectionError too (as UsageError is a ValueError).
    assert isinstance(e.value, builtins.ConnectionError)
    assert "127.0.0.1:1" in str(e.value)
    assert str(e.value) == _cli_error(cargo_bin, "eval", "--url", "127.0.0.1:1", "--model", "oracle",
                                      "--data", str(SAMPLE), "--output-dir", "/tmp/bertqa-unused",
                                      "--connect-timeout-ms", "300")


def test_an_unknown_model_raises_model_error(grpc_url, cargo_bin):
    with pytest.raises(bertqa.ModelError) as e:
        bertqa.ask(grpc_url, "no-such-model", "Who?", "Ada.")
    assert '"no-such-model"' in str(e.value)
    assert str(e.value) == _cli_error(cargo_bin, "ask", "--url", grpc_url, "--model", "no-such-model",
                                      "--question", "Who?", "--context", "Ada.")


def test_a_bad_data_file_raises_input_error_naming_the_line(grpc_url, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": "v2.0", "data": [\n  {"title": "x",,}\n]}\n')
    with pytest.raises(bertqa.InputError) as e:
        bertqa.evaluate(grpc_url, "oracle", bad)
    assert f"{bad}:2" in str(e.value)
    with pytest.raises(bertqa.InputError):
        bertqa.score(bad, {})


def test_a_failing_server_raises_server_error(grpc_url):
    with pytest.raises(bertqa.ServerError) as e:
        bertqa.evaluate(grpc_url, "fault-internal", SAMPLE, retries=0)
    assert "fault-internal" in str(e.value)


def test_a_failed_gate_raises_after_the_report_is_complete(grpc_url, tmp_path):
    with pytest.raises(bertqa.GateFailed) as e:
        bertqa.evaluate(grpc_url, "oracle", SAMPLE, min_f1=101, output_dir=tmp_path)
    assert e.value.exit_code == 1
    assert e.value.gates == ["--min-f1 101: measured 100.000"]
    assert e.value.report["metrics"]["f1"] == 100.0
    assert e.value.report["predictions"] == json.loads((tmp_path / "predictions.json").read_text())


def test_bad_options_raise_usage_error(grpc_url):
    with pytest.raises(bertqa.UsageError, match="no option 'batchsize'"):
        bertqa.evaluate(grpc_url, "oracle", SAMPLE, batchsize=8)
    with pytest.raises(bertqa.UsageError, match="--batch-size"):
        bertqa.evaluate(grpc_url, "oracle", SAMPLE, batch_size=0)
    with pytest.raises(bertqa.UsageError, match="--postprocess"):
        bertqa.evaluate(grpc_url, "oracle", SAMPLE, postprocess="nope")


def test_ctrl_c_stops_the_run_and_keeps_the_journal(grpc_url, big_dataset, tmp_path, ctrl_c):
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        bertqa.evaluate(grpc_url, "oracle-slow", big_dataset, batch_size=1, concurrency=1,
                        output_dir=tmp_path)
    assert time.monotonic() - started < 15
    journaled = (tmp_path / "journal.bqj").stat().st_size
    assert journaled > 0
    # What was answered is kept: the rest is asked on --resume, in larger batches.
    resumed = bertqa.evaluate(grpc_url, "oracle-slow", big_dataset, resume=True, output_dir=tmp_path)
    assert resumed["metrics"]["exact"] == 100.0


def test_ctrl_c_stops_a_parallel_comparison_on_every_thread(grpc_url, big_dataset, tmp_path, ctrl_c):
    # `parallel` runs each model on a thread of its own: the stop reaches them all.
    timer = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        bertqa.compare(["oracle-slow", "oracle"], big_dataset, url=grpc_url, parallel=True,
                       batch_size=1, concurrency=1, output_dir=tmp_path)
    assert time.monotonic() - started < 15


def test_the_gil_is_released_while_a_run_works(grpc_url):
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        bertqa.evaluate(grpc_url, "oracle-slow", SAMPLE, batch_size=1, concurrency=1)
    finally:
        stop.set()
        ticker.join()
    # 16+ requests of 40 ms each: the other thread ran all along.
    assert len(ticks) > 100


def test_nothing_is_printed_unless_asked(grpc_url, capfd):
    bertqa.evaluate(grpc_url, "oracle", SAMPLE)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_help_lists_every_option_and_the_stubs_match():
    for function, command in ((bertqa.evaluate, "eval"), (bertqa.ask, "ask"),
                              (bertqa.compare, "compare"), (bertqa.score, "score")):
        names = list(getattr(_api, f"_{command.upper()}").flags)
        assert len(names) >= 2
        for name in names:
            assert f"\n    {name}" in inspect.getdoc(function), (command, name)
    assert "batch_size" in bertqa.evaluate.__doc__ and "min_exact" in bertqa.evaluate.__doc__
    stubs = open(os.path.join(os.path.dirname(bertqa.__file__), "__init__.pyi")).read()
    assert stubs == _stubs.stubs(), "python/bertqa/__init__.pyi is stale: python -m bertqa._stubs"


def test_module_functions_run_from_several_threads_at_once(grpc_url):
    from concurrent.futures import ThreadPoolExecutor

    expected = bertqa.evaluate(grpc_url, "oracle", SAMPLE)
    with ThreadPoolExecutor(4) as pool:
        reports = list(pool.map(lambda _: bertqa.evaluate(grpc_url, "oracle", SAMPLE), range(4)))
    for report in reports:
        assert report["predictions"] == expected["predictions"]
        assert report["metrics"] == expected["metrics"]
        # Counts stay integers and scores floats, as the command's JSON has them.
        assert isinstance(report["metrics"]["total"], int)
        assert isinstance(report["metrics"]["exact"], float)


def _flag_default(flag):
    """A flag's default as the value a Python caller gives."""
    if not flag.takes_value:
        return flag.long in _api._NEGATIONS
    if flag.default in (None, ""):
        return flag.default
    for kind in (int, float):
        try:
            return kind(flag.default)
        except ValueError:
            pass
    return flag.default


def test_every_option_is_a_setting_of_the_library_with_its_default():
    from bertqa import _native

    for function, command in (("evaluate", _api._EVAL), ("ask", _api._ASK),
                              ("compare", _api._COMPARE), ("score", _api._SCORE),
                              ("Client.perf", _api._PERF), ("Client.tune", _api._TUNE)):
        library = dict(_native.settings(function))
        assert sorted(command.flags) == sorted(library), function
        for name, flag in command.flags.items():
            documented, default = _flag_default(flag), library[name]
            if flag.takes_value and documented in (None, ""):
                # The library chooses (from the model, the data), or "" is its default.
                assert default in (None, ""), (function, name, default)
                continue
            assert documented == default, (function, name, documented, default)


def test_every_option_of_client_is_a_setting_of_the_library_with_its_default():
    from bertqa import _native

    library = dict(_native.settings("Client"))
    # The class a program builds and the native one it wraps declare the same options.
    for cls in (bertqa.Client, _native.Client):
        options = {p.name: p.default for p in inspect.signature(cls).parameters.values()
                   if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert sorted(options) == sorted(library), cls
        for name, default in options.items():
            assert default == library[name], (cls, name, default, library[name])
            assert type(default) is type(library[name]), (cls, name, default)
