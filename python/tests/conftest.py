"""The package's tests run against a real Triton of the test bed, started by
scripts/test_python.sh, which passes where it listens and where cargo's binary is:
BERTQA_TEST_GRPC and BERTQA_TEST_HTTP (host:port), BERTQA_CARGO_BIN. The working
directory is the repository's root (data/, vocab/, tests/golden/)."""

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample-squad-v2.json"


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(f"{name} is not set: run the tests with scripts/test_python.sh")
    return value


@pytest.fixture(scope="session")
def grpc_url() -> str:
    return _env("BERTQA_TEST_GRPC")


@pytest.fixture(scope="session")
def http_url() -> str:
    return _env("BERTQA_TEST_HTTP")


@pytest.fixture(scope="session", params=["grpc", "http"])
def endpoint(request, grpc_url, http_url):
    """(protocol, url) of the server, once per protocol."""
    return request.param, grpc_url if request.param == "grpc" else http_url


@pytest.fixture(scope="session")
def cargo_bin() -> str:
    path = _env("BERTQA_CARGO_BIN")
    assert os.access(path, os.X_OK), f"no cargo-built bertqa at {path}"
    return path


@pytest.fixture(scope="session")
def wheel_bin() -> str:
    """The `bertqa` command the wheel installed (the venv's, not cargo's)."""
    path = shutil.which("bertqa")
    assert path is not None and "target" not in Path(path).parts, path
    return path


def run(program: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """A command's exit code, stdout and stderr (text), run from the repository root."""
    return subprocess.run(
        [program, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, **kwargs
    )


@pytest.fixture(scope="session")
def big_dataset(tmp_path_factory) -> Path:
    """The sample's questions 30 times over (new ids, same texts: the oracle still
    knows their answers): a run that lasts, to be interrupted."""
    sample = json.loads(SAMPLE.read_text())
    data = []
    for copy in range(30):
        for article in sample["data"]:
            paragraphs = []
            for p in article["paragraphs"]:
                qas = [dict(q, id=f"{q['id']}-{copy}") for q in p["qas"]]
                paragraphs.append(dict(p, qas=qas))
            data.append(dict(article, paragraphs=paragraphs))
    path = tmp_path_factory.mktemp("big") / "big.json"
    path.write_text(json.dumps({"version": sample["version"], "data": data}))
    return path


def default_sigint() -> None:
    """A ``preexec_fn``: the child starts with SIGINT's default disposition, as from an
    interactive shell, whatever this process inherited (a script's ``cmd &`` leaves it
    ignored, an ignore passes on to children, and bertqa keeps an inherited ignore)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ignored_sigint() -> None:
    """A ``preexec_fn``: the child starts with SIGINT ignored, as a script's ``cmd &``
    starts it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def ctrl_c():
    """Python's Ctrl-C handler (SIGINT raises KeyboardInterrupt) for the test, whatever
    SIGINT's disposition on entry: Python leaves an inherited ignore in place. The
    previous disposition is put back after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)
