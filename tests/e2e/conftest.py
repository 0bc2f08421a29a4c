"""Starts `ferrite serve` on SmolLM2 for the suite, and fails the suite if the server panics."""

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import openai
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2"
# Its chat template renders tools (Hermes-style <tool_call> blocks).
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_NAME = "qwen-coder"
API_KEY = "e2e-secret"
MAX_MODEL_LEN = 2048


def models_dir() -> Path:
    return Path(os.environ.get("FERRITE_MODELS", Path.home() / ".cache/ferrite/models"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(proc, url: str, log_path: Path, timeout: float = 60) -> None:
    """Returns once the server `proc` started answers 200 on `url`/health; fails the test with
    its log's tail if it exits first or is not up within `timeout` seconds (then it is killed)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"server exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"server did not come up in {timeout:.0f} s:\n{log_path.read_text()[-4000:]}")


class Server:
    def __init__(self, extra_args, tmp: Path, name: str, model_file: str = MODEL_FILE,
                 model_name: str = MODEL_NAME):
        model = models_dir() / model_file
        if not model.is_file():
            pytest.fail(f"{model} is missing: run scripts/fetch_models.sh")
        binary = os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / f"{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "serve", str(model), "--port", str(self.port),
             "--served-model-name", model_name, "--max-model-len", str(MAX_MODEL_LEN),
             "--kv-cache-memory", "256MiB", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT,
        )
        wait_healthy(self.proc, self.url, self.log_path)

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text()

    def alive(self) -> bool:
        return self.proc.poll() is None and httpx.get(self.url + "/health", timeout=5).status_code == 200

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        text = self.log_path.read_text()
        assert "panicked" not in text, f"the server panicked:\n{text}"


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = Server(["--api-key", API_KEY], tmp_path_factory.mktemp("srv"), "main")
    yield s
    s.stop()


@pytest.fixture(scope="session")
def qwen_server(tmp_path_factory):
    s = Server([], tmp_path_factory.mktemp("qwen"), "qwen", QWEN_FILE, QWEN_NAME)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def qwen(qwen_server) -> openai.OpenAI:
    return openai.OpenAI(base_url=qwen_server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def http(server) -> httpx.Client:
    """Raw HTTP for what the openai client hides (status codes, error bodies, SSE lines)."""
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {API_KEY}"}, timeout=120)


def metric(http: httpx.Client, name: str) -> float:
    for line in http.get("/metrics").text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")
