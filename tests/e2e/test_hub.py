"""Hugging Face models: a model directory made from the SmolLM2 GGUF (scripts/make_hf_test_dir.py)
gives the GGUF's tokens, and `ferrite serve org/name` downloads it from a local stand-in of the
hub (HF_ENDPOINT) into a fresh HF_HOME -- progress on stderr, a connection dropped mid-file
resumed, then served -- and later runs with HF_HUB_OFFLINE=1 use the cache."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from conftest import MODEL_FILE, ROOT, free_port, models_dir
from hub_standin import COMMIT, HubStandIn, Repo, sha256_of

REPO_ID = "e2e-org/SmolLM2-135M-Instruct"
QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
# Rebuilt when the script changes what it writes (its FORMAT_VERSION).
DIR_VERSION = 1
PROMPT = "The three primary colors are"


def binary():
    return os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))


# SmolLM2's directory is f32: the GGUF's dequantized weights exactly, so the tokens must be the
# GGUF's exactly (in bf16 its chat answer takes the other side of a near-tie at token 19).
# Qwen's is bf16, the format checkpoints come in; it gives the GGUF's tokens on these prompts.
DTYPES = {MODEL_FILE: "f32", QWEN_FILE: "bf16"}


def hf_dir_of(gguf_file: str) -> Path:
    """The Hugging Face directory made from a test GGUF, built once and kept beside the models."""
    gguf = models_dir() / gguf_file
    if not gguf.is_file():
        pytest.fail(f"{gguf} is missing: run scripts/fetch_models.sh")
    dtype = DTYPES[gguf_file]
    out = models_dir() / "hf" / f"{gguf.stem}.{dtype}.v{DIR_VERSION}"
    if not (out / "config.json").is_file():
        started = time.time()
        subprocess.run([sys.executable, str(ROOT / "scripts/make_hf_test_dir.py"), str(gguf), str(out),
                        "--dtype", dtype], check=True)
        print(f"made {out.name} in {time.time() - started:.1f}s")
    return out


@pytest.fixture(scope="module")
def smollm2_dir():
    return hf_dir_of(MODEL_FILE)


def shard_names(directory: Path):
    return sorted({f for f in json.loads((directory / "model.safetensors.index.json").read_text())
                   ["weight_map"].values()})


def generate(model, *extra, env=None, check=True):
    cmd = [binary(), "generate", str(model), "--prompt", PROMPT, "--max-tokens", "24", "--token-ids",
           "--kv-cache-memory", "64MiB", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert r.returncode == 0, f"{cmd} failed:\n{r.stderr}"
    return r


def token_ids(result):
    return [int(t) for t in result.stdout.split()]


@pytest.mark.parametrize("gguf_file", [MODEL_FILE, QWEN_FILE], ids=["smollm2-llama", "qwen2.5-0.5b"])
def test_the_directory_gives_the_ggufs_greedy_tokens(gguf_file):
    directory = hf_dir_of(gguf_file)
    for extra in ([], ["--chat"]):
        from_gguf = token_ids(generate(models_dir() / gguf_file, *extra))
        from_dir = token_ids(generate(directory, *extra))
        assert len(from_gguf) > 0
        assert from_dir == from_gguf, f"{extra}: directory {from_dir} vs gguf {from_gguf}"


def test_quantization_fp8_keeps_the_answer_and_refuses_a_quantized_file():
    """--quantization fp8 on the bf16 Qwen directory (every projection FP8, one scale per output
    channel): the known answer survives (its first greedy tokens equal the bf16 model's;
    measured: docs/performance.md, 'Measurements formerly in source comments'); on the Q4_1
    GGUF the flag is refused, naming a tensor and its type."""
    directory = hf_dir_of(QWEN_FILE)
    quantized = generate(directory, "--quantization", "fp8")
    # 24 layers x 7 projections, each now FP8 (the log line is the quantizer's own count).
    assert "linear layers quantized to FP8" in quantized.stderr, quantized.stderr
    assert "matrices=168" in quantized.stderr, quantized.stderr
    fp8 = token_ids(quantized)
    plain = token_ids(generate(directory))
    assert fp8[:8] == plain[:8], f"fp8 {fp8} vs bf16 {plain}"
    words = subprocess.run(
        [binary(), "generate", str(directory), "--prompt", PROMPT, "--max-tokens", "8",
         "--kv-cache-memory", "64MiB", "--quantization", "fp8"],
        capture_output=True, text=True, timeout=300)
    assert words.returncode == 0, words.stderr
    assert words.stdout.strip().startswith("red, blue, and green"), words.stdout
    refused = generate(models_dir() / MODEL_FILE, "--quantization", "fp8", check=False)
    assert refused.returncode != 0
    assert "already Q4_1" in refused.stderr and "--quantization fp8" in refused.stderr, refused.stderr


def test_an_unsupported_architecture_is_named(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"architectures": ["FancyNewForCausalLM"], "model_type": "fancy", "vocab_size": 8,'
        ' "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1,'
        ' "num_attention_heads": 1, "rms_norm_eps": 1e-6, "max_position_embeddings": 8}')
    r = generate(tmp_path, check=False)
    assert r.returncode != 0
    assert "FancyNewForCausalLM" in r.stderr, r.stderr


@pytest.fixture(scope="module")
def hub(smollm2_dir):
    decoys = {"pytorch_model.bin": b"not needed" * 100, "README.md": b"# card\n",
              "onnx/model.onnx": b"onnx"}
    stand_in = HubStandIn({REPO_ID: Repo(smollm2_dir, decoys)}, drop_once=[shard_names(smollm2_dir)[1]])
    yield stand_in
    stand_in.stop()


@pytest.fixture(scope="module")
def hf_home(tmp_path_factory):
    return tmp_path_factory.mktemp("hf-home")


def hub_env(hf_home, endpoint, offline=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HOME=str(hf_home), HF_ENDPOINT=endpoint, HF_TOKEN="hf_e2e_not_a_secret")
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return env


def test_serve_downloads_a_hub_model_with_progress_resumes_a_dropped_file_and_serves(
        hub, hf_home, smollm2_dir, tmp_path):
    port = free_port()
    log_path = tmp_path / "serve.log"
    started = time.time()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [binary(), "serve", REPO_ID, "--port", str(port), "--kv-cache-memory", "64MiB",
             "--max-model-len", "1024"],
            stdout=subprocess.DEVNULL, stderr=log, env=hub_env(hf_home, hub.url))
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.time() + 180
            while True:
                assert proc.poll() is None, f"serve exited {proc.returncode}:\n{log_path.read_text()}"
                assert time.time() < deadline, f"serve did not come up:\n{log_path.read_text()}"
                try:
                    if httpx.get(url + "/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.3)
            print(f"hub download + load: {time.time() - started:.1f}s")
            client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=120)
            assert [m.id for m in client.models.list().data] == [REPO_ID]
            r = client.chat.completions.create(
                model=REPO_ID, messages=[{"role": "user", "content": "What is the capital of France?"}],
                max_tokens=12, temperature=0)
            assert "Paris" in r.choices[0].message.content
        finally:
            proc.terminate()
            proc.wait(timeout=20)
    stderr = log_path.read_text()
    assert "panicked" not in stderr, stderr
    # A progress line per file, each reaching 100%.
    shards = shard_names(smollm2_dir)
    for name in ["config.json", "tokenizer.json", "model.safetensors.index.json", *shards]:
        assert f"downloading {name}: 100%" in stderr, stderr
    # The dropped file: cut at half, then fetched again from where it stopped, not from 0.
    shard = shards[1]
    size = (smollm2_dir / shard).stat().st_size
    ranges = [r for _, r in hub.requested("/" + shard) if r != "bytes=0-0"]
    assert len(ranges) >= 2, ranges
    resumed_at = int(ranges[-1].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at < size and resumed_at >= size // 2 - (1 << 20), ranges
    assert f"downloading {shard}: transfer broken at" in stderr, stderr
    # Only what the model needs was fetched.
    for decoy in ["pytorch_model.bin", "README.md", "onnx/model.onnx"]:
        assert not hub.requested("/" + decoy), decoy
    # The standard cache layout, every file byte-exact.
    snapshot = hf_home / "hub" / f"models--{REPO_ID.replace('/', '--')}" / "snapshots" / COMMIT
    for f in smollm2_dir.iterdir():
        assert sha256_of(snapshot / f.name) == sha256_of(f), f.name


def test_offline_uses_the_cache(hub, hf_home, smollm2_dir):
    if not (hf_home / "hub").is_dir():
        pytest.skip("needs the download test's cache")
    before = len(hub.requests)
    dead = f"http://127.0.0.1:{free_port()}"
    from_cache = generate(REPO_ID, env=hub_env(hf_home, dead, offline=True))
    assert len(hub.requests) == before
    assert token_ids(from_cache) == token_ids(generate(smollm2_dir))


def test_offline_and_not_cached_is_a_clear_error(hf_home, tmp_path):
    r = generate("e2e-org/not-downloaded", env=hub_env(tmp_path, "http://127.0.0.1:9", offline=True),
                 check=False)
    assert r.returncode != 0
    assert "e2e-org/not-downloaded" in r.stderr and "HF_HUB_OFFLINE" in r.stderr, r.stderr


def test_an_unknown_repository_is_a_clear_error(hub, tmp_path):
    r = generate("e2e-org/no-such-model", env=hub_env(tmp_path, hub.url), check=False)
    assert r.returncode != 0
    assert "e2e-org/no-such-model" in r.stderr and "not found" in r.stderr, r.stderr
