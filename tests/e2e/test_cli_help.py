"""The command line itself: `--help` grouped by topic in a fixed order with every flag explained,
shell completion scripts, and `--max-model-len` held against the model's own context limit
(refused with both numbers, as vLLM does, unless FERRITE_ALLOW_LONG_MAX_MODEL_LEN=1)."""

import os
import re
import shutil
import subprocess

import httpx
import pytest

from conftest import MODEL_FILE, ROOT, free_port, models_dir, wait_healthy

# SmolLM2-135M's GGUF says context_length 8192.
SMOLLM2_LIMIT = 8192
ENV = "FERRITE_ALLOW_LONG_MAX_MODEL_LEN"
ENGINE_HEADINGS = ["Model", "Engine", "Memory", "Speculative decoding"]


def binary() -> str:
    return os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))


def ferrite(*args, env=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([binary(), *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def sections(help_text: str) -> dict:
    """heading -> [(flag, help)] in printed order; a flag's help is the rest of its line or,
    when the flag is long, the next line."""
    out, heading, lines = {}, None, help_text.splitlines()
    for i, line in enumerate(lines):
        if m := re.fullmatch(r"([A-Z][A-Za-z ]*):", line):
            heading = m.group(1)
            out[heading] = []
        elif heading and (m := re.match(r" {2,6}(?:-\w, )?(--[\w-]+|\[[A-Z_]+\]|<[A-Z_]+>)(.*)", line)):
            rest = m.group(2).split("  ", 1)
            text = rest[1].strip() if len(rest) > 1 else ""
            if not text and i + 1 < len(lines) and not lines[i + 1].lstrip().startswith("-"):
                text = lines[i + 1].strip()
            out[heading].append((m.group(1), text))
    return out


def flags(section) -> list:
    return [f for f, _ in section]


def test_serve_help_is_grouped_model_first_operations_last_every_flag_explained():
    r = ferrite("serve", "-h")
    assert r.returncode == 0, r.stderr
    got = sections(r.stdout.split("Model architectures:")[0])
    assert list(got) == ["Arguments", "Options", *ENGINE_HEADINGS, "API", "Operations"], list(got)
    assert flags(got["Options"]) == ["--help"]
    assert flags(got["Model"])[:3] == ["--model", "--served-model-name", "--max-model-len"]
    # Flags where a user looks for them, vLLM's among ferrite's own.
    where = {"--chat-template": "Model", "--download-dir": "Model", "--device": "Engine",
             "--dtype": "Engine", "--kv-cache-memory": "Memory", "--no-prefix-caching": "Memory",
             "--enable-prefix-caching": "Memory", "--speculative": "Speculative decoding",
             "--draft-model": "Speculative decoding", "--port": "API", "--api-key": "API",
             "--tool-call-parser": "API", "--allowed-origins": "API", "--seed": "API",
             "--shutdown-timeout": "Operations", "--log-format": "Operations",
             "--kv-events-config": "Operations", "--disable-log-requests": "Operations"}
    for flag, heading in where.items():
        assert flag in flags(got[heading]), f"{flag} not under {heading}: {got[heading]}"
    every = [entry for section in got.values() for entry in section]
    assert len(every) >= 70
    unexplained = [f for f, text in every if not text]
    assert not unexplained, unexplained
    # Each flag once: no topic repeats another's.
    names = [f for f, _ in every]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("command", ["run-batch", "generate", "bench-model", "doctor"])
def test_the_other_model_commands_group_their_engine_flags_alike(command):
    r = ferrite(command, "-h")
    assert r.returncode == 0, r.stderr
    got = sections(r.stdout)
    headings = [h for h in got if h not in ("Arguments", "Options")]
    assert headings[:4] == ENGINE_HEADINGS, headings
    assert "--max-model-len" in flags(got["Model"])
    assert not [f for section in got.values() for f, text in section if not text]


def test_bench_help_is_grouped():
    got = sections(ferrite("bench", "-h").stdout)
    assert list(got) == ["Options", "Server", "Workload", "Report"], list(got)
    assert "--url" in flags(got["Server"]) and "--slo" in flags(got["Report"])


def test_completion_scripts_for_bash_zsh_and_fish(tmp_path):
    scripts = {}
    for shell in ["bash", "zsh", "fish"]:
        r = ferrite("completions", shell)
        assert r.returncode == 0, r.stderr
        scripts[shell] = r.stdout
        # Subcommands and flags of subcommands are in every script.
        for word in ["run-batch", "completions", "max-model-len", "retry-failed"]:
            assert word in r.stdout, f"{shell}: {word}"
    assert scripts["bash"].lstrip().startswith("_ferrite()")
    assert scripts["zsh"].startswith("#compdef ferrite")
    assert "complete -c ferrite" in scripts["fish"]
    for shell, script in scripts.items():
        path = tmp_path / f"ferrite.{shell}"
        path.write_text(script)
        if shell == "bash" or shutil.which(shell):
            check = subprocess.run([shell, "-n", str(path)], capture_output=True, text=True)
            assert check.returncode == 0, f"{shell} -n: {check.stderr}"
    # Sourced into bash, it completes a subcommand's flags.
    probe = (f"source {tmp_path / 'ferrite.bash'}; COMP_WORDS=(ferrite serve --max-mo); "
             "COMP_CWORD=2; _ferrite ferrite --max-mo serve; echo ${COMPREPLY[@]}")
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
    assert done.stdout.split() == ["--max-model-len"], (done.stdout, done.stderr)
    assert ferrite("completions", "tcsh").returncode != 0


def serve(tmp_path, max_model_len: int, env=None):
    model = models_dir() / MODEL_FILE
    if not model.is_file():
        pytest.fail(f"{model} is missing: run scripts/fetch_models.sh")
    port = free_port()
    log_path = tmp_path / f"serve-{max_model_len}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([binary(), "serve", str(model), "--port", str(port),
                             "--max-model-len", str(max_model_len), "--kv-cache-memory", "512MiB"],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, f"http://127.0.0.1:{port}", log_path


def test_max_model_len_beyond_the_models_limit_fails_naming_both_numbers(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != ENV}
    proc, _, log_path = serve(tmp_path, 2 * SMOLLM2_LIMIT, env)
    assert proc.wait(timeout=120) != 0
    text = log_path.read_text()
    assert f"--max-model-len {2 * SMOLLM2_LIMIT}" in text, text
    assert f"context limit of {SMOLLM2_LIMIT} tokens" in text, text
    assert f"{ENV}=1" in text, text
    assert "panicked" not in text
    # The limit itself is fine (the engine's own check is then the KV cache's size).
    r = ferrite("generate", str(models_dir() / MODEL_FILE), "--prompt", "hi", "--max-tokens", "2",
                "--max-model-len", str(SMOLLM2_LIMIT), "--kv-cache-memory", "512MiB", env=env)
    assert r.returncode == 0, r.stderr


def test_the_override_variable_lets_it_start_with_a_warning(tmp_path):
    asked = SMOLLM2_LIMIT + 800
    proc, url, log_path = serve(tmp_path, asked, {**os.environ, ENV: "1"})
    try:
        wait_healthy(proc, url, log_path, timeout=120)
        card = httpx.get(url + "/v1/models").json()["data"][0]
        assert card["max_model_len"] == asked
        r = httpx.post(url + "/v1/completions", json={"prompt": "Hello", "max_tokens": 4}, timeout=60)
        assert r.status_code == 200, r.text
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log_path.read_text()
    assert f"allowed by {ENV}" in text and str(SMOLLM2_LIMIT) in text, text
    assert "panicked" not in text
