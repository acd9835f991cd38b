"""The `bertqa` command of the wheel is the command line of cargo's build: the same
output, errors and exit codes, the same files, and Ctrl-C acts the same."""

import filecmp
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import ROOT, SAMPLE, default_sigint, ignored_sigint, run

GOLDEN_V2 = ROOT / "tests" / "golden" / "decode" / "v2"


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["--help"],
        ["eval", "--help"],
        ["ask", "--help"],
        ["eval", "--data"],  # a usage error: exit 2
        ["score", "--data", str(ROOT / "no-such-file.json"), "--predictions", "p.json"],
        ["eval", "--url", "127.0.0.1:1", "--model", "oracle", "--data", str(SAMPLE),
         "--output-dir", "/tmp/bertqa-pytest-connection", "--connect-timeout-ms", "300"],
    ],
    ids=["version", "help", "eval-help", "ask-help", "usage", "input", "connection"],
)
def test_the_command_answers_as_cargos_build(args, cargo_bin, wheel_bin):
    ours, cargos = run(wheel_bin, *args), run(cargo_bin, *args)
    assert (ours.returncode, ours.stdout, ours.stderr) == (
        cargos.returncode,
        cargos.stdout,
        cargos.stderr,
    )
    assert ours.returncode == (0 if "--help" in args or "--version" in args else 2)


def test_score_prints_what_cargos_build_prints(cargo_bin, wheel_bin):
    case = next(c for c in json.loads((GOLDEN_V2 / "scores.json").read_text()) if c["na_prob_file"])
    args = [
        "score",
        "--data", str(ROOT / "tests" / "fixtures" / "decode" / "squad_v2.json"),
        "--predictions", str(GOLDEN_V2 / case["predictions"]),
        "--na-prob-file", str(GOLDEN_V2 / case["na_prob_file"]),
        "--json",
    ]
    ours, cargos = run(wheel_bin, *args), run(cargo_bin, *args)
    assert ours.returncode == cargos.returncode == 0, ours.stderr
    assert ours.stdout == cargos.stdout
    assert json.loads(ours.stdout)["metrics"]["exact"] == case["metrics"]["exact"]


def test_eval_writes_the_same_files_with_the_same_gate_exit(endpoint, cargo_bin, wheel_bin, tmp_path):
    protocol, url = endpoint
    outputs = {}
    for name, program in (("wheel", wheel_bin), ("cargo", cargo_bin)):
        out = tmp_path / name
        done = run(program, "eval", "--url", url, "--protocol", protocol, "--model", "oracle",
                   "--data", str(SAMPLE), "--output-dir", str(out), "--quiet", "--min-f1", "101")
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines()[-1].startswith("gate failed: --min-f1 101")
        outputs[name] = (out, done.stderr)
    assert outputs["wheel"][1] == outputs["cargo"][1]
    wheel, cargo = outputs["wheel"][0], outputs["cargo"][0]
    files = sorted(p.name for p in cargo.iterdir() if p.name != "metrics.json")
    assert files == sorted(p.name for p in wheel.iterdir() if p.name != "metrics.json")
    assert "predictions.json" in files and "null_odds.json" in files
    match, mismatch, errors = filecmp.cmpfiles(cargo, wheel, files, shallow=False)
    assert (mismatch, errors) == ([], []), (mismatch, errors)


def _interrupted(program, args, cwd, after_s, started=None, sigint=default_sigint):
    """Runs `program`, started with SIGINT's disposition set by `sigint` (a preexec_fn:
    the default's, or ignored), sends SIGINT `after_s` seconds after `started` (a file)
    exists, or after the start, while it runs, and returns its exit code and stderr."""
    proc = subprocess.Popen([program, *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint)
    if started is not None:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    time.sleep(after_s)
    assert proc.poll() is None, "the program ended before the signal"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, err


def test_ctrl_c_stops_eval_as_it_stops_cargos_build(grpc_url, cargo_bin, wheel_bin, tmp_path, big_dataset):
    results = {}
    for name, program in (("wheel", wheel_bin), ("cargo", cargo_bin)):
        out = tmp_path / name
        args = ["eval", "--url", grpc_url, "--model", "oracle-slow", "--data", str(big_dataset),
                "--output-dir", str(out), "--quiet", "--batch-size", "1", "--concurrency", "1"]
        # Once the run's journal exists, requests are under way.
        code, err = _interrupted(program, args, ROOT, 1.0, started=out / "journal.bqj")
        assert "stopping: no new requests" in err, err
        assert (out / "predictions.json").exists() or any(out.iterdir()), err
        results[name] = code
    assert results["wheel"] == results["cargo"] == 2


def test_ctrl_c_ends_ask_as_it_ends_cargos_build(grpc_url, cargo_bin, wheel_bin):
    codes = {}
    for name, program in (("wheel", wheel_bin), ("cargo", cargo_bin)):
        # A long context: many windows, each 40 ms on oracle-slow.
        args = ["ask", "--url", grpc_url, "--model", "oracle-slow", "--question", "Who?",
                "--context", "Ada was here. " * 6000, "--batch-size", "1", "--concurrency", "1"]
        codes[name], _ = _interrupted(program, args, ROOT, 1.5)
    assert codes["wheel"] == codes["cargo"] == -signal.SIGINT


def test_an_ignored_sigint_stays_ignored_as_in_cargos_build(grpc_url, cargo_bin, wheel_bin, tmp_path):
    # Started as a script's `cmd &` starts it (SIGINT ignored), eval, which otherwise
    # stops at Ctrl-C, goes on through a SIGINT to its normal end.
    for name, program in (("wheel", wheel_bin), ("cargo", cargo_bin)):
        out = tmp_path / name
        args = ["eval", "--url", grpc_url, "--model", "oracle-slow", "--data", str(SAMPLE),
                "--output-dir", str(out), "--quiet", "--batch-size", "1", "--concurrency", "1"]
        code, err = _interrupted(program, args, ROOT, 0.2, started=out / "journal.bqj",
                                 sigint=ignored_sigint)
        assert code == 0, (name, err)
        assert "stopping" not in err, (name, err)
        assert "partial" not in json.loads((out / "metrics.json").read_text()), name
        assert not (out / "journal.bqj").exists(), name
