"""`ferrite run-batch`: an OpenAI Batch file run in-process on SmolLM2. Results must equal what
`ferrite serve` answers to the same bodies; bad lines become error lines and the batch goes on;
a killed run resumes with each custom_id exactly once in the output; `--retry-failed` runs
exactly the failed lines again; `--model` runs a file whose bodies name another model."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import MAX_MODEL_LEN, MODEL_FILE, MODEL_NAME, ROOT, models_dir

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
TOPICS = ["the sea", "bread", "winter", "trains"]
PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time"]


def binary() -> str:
    return os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))


def command(inp: Path, out: Path, *extra, model_flag=False) -> list:
    model = str(models_dir() / MODEL_FILE)
    return [binary(), "run-batch", *(["--model", model] if model_flag else [model]),
            "-i", str(inp), "-o", str(out),
            "--served-model-name", MODEL_NAME, "--max-model-len", str(MAX_MODEL_LEN),
            "--kv-cache-memory", "256MiB", *extra]


def run_batch(inp: Path, out: Path, *extra, model_flag=False) -> str:
    p = subprocess.run(command(inp, out, *extra, model_flag=model_flag), capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, f"run-batch failed ({p.returncode}):\n{p.stdout}\n{p.stderr}"
    assert "panicked" not in p.stderr, p.stderr
    return p.stdout


def line(custom_id, url, body) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body})


def good_requests() -> dict:
    """custom_id -> (url, body): greedy chat and completion requests."""
    reqs = {}
    for i, topic in enumerate(TOPICS):
        reqs[f"chat-{i}"] = (CHAT, {"model": MODEL_NAME, "max_tokens": 12, "temperature": 0,
                                    "messages": [{"role": "user",
                                                  "content": f"Write one sentence about {topic}."}]})
    for i, prompt in enumerate(PROMPTS):
        reqs[f"comp-{i}"] = (COMP, {"model": MODEL_NAME, "prompt": prompt, "max_tokens": 10,
                                    "temperature": 0})
    return reqs


def read_results(out: Path) -> list:
    text = out.read_text()
    assert text.endswith("\n")
    return [json.loads(l) for l in text.splitlines()]


def answer_text(body) -> tuple:
    choice = body["choices"][0]
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    return text, choice["finish_reason"], body["usage"]["completion_tokens"]


def test_mixed_batch_equals_serve_and_bad_lines_become_error_lines(tmp_path, http):
    reqs = good_requests()
    lines = [line(cid, url, body) for cid, (url, body) in reqs.items()]
    lines += [
        '{"custom_id": "broken", "method": "POST", ',  # not JSON: the custom_id is unknown
        "",  # blank lines are skipped
        line("unknown-field", CHAT, {"model": MODEL_NAME, "frobnicate": 1,
                                     "messages": [{"role": "user", "content": "hi"}]}),
        line("other-model", COMP, {"model": "gpt-17", "prompt": "hi"}),
        line("streamed", COMP, {"model": MODEL_NAME, "prompt": "hi", "stream": True}),
        json.dumps({"custom_id": "no-url", "method": "POST", "body": {"prompt": "hi"}}),
    ]
    inp, out = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    inp.write_text("\n".join(lines) + "\n")
    summary = run_batch(inp, out)

    results = read_results(out)
    assert len(results) == len(reqs) + 5
    by_id = {r["custom_id"]: r for r in results if r["custom_id"] is not None}
    assert len(by_id) == len(reqs) + 4
    assert len({r["id"] for r in results}) == len(results)
    for cid, (url, body) in reqs.items():
        r = by_id[cid]
        assert r["error"] is None and r["response"]["status_code"] == 200, r
        assert r["response"]["request_id"].startswith("req_")
        served = http.post(url, json=body)
        assert served.status_code == 200, served.text
        got, want = answer_text(r["response"]["body"]), answer_text(served.json())
        assert got[0], cid
        assert got == want, f"{cid}: run-batch {got!r} vs serve {want!r}"

    unknown = by_id["unknown-field"]["response"]
    assert unknown["status_code"] == 400
    assert "frobnicate" in unknown["body"]["error"]["message"]
    assert by_id["other-model"]["response"]["status_code"] == 404
    for cid, code in [("streamed", "invalid_request"), ("no-url", "missing_required_parameter")]:
        assert by_id[cid]["response"] is None
        assert by_id[cid]["error"]["code"] == code, by_id[cid]
    broken = [r for r in results if r["custom_id"] is None]
    assert len(broken) == 1 and broken[0]["response"] is None
    assert broken[0]["error"]["code"] == "invalid_json_line"
    assert broken[0]["error"]["line"] == len(reqs) + 1

    assert f"{len(reqs) + 5} ({len(reqs)} ok, 5 failed" in summary, summary
    assert "tok/s" in summary


def test_a_killed_run_resumes_with_each_custom_id_exactly_once(tmp_path):
    n = 24
    lines = [line(f"r{i}", COMP, {"model": MODEL_NAME, "prompt": f"Item {i}: a list of fruit:",
                                  "max_tokens": 48, "temperature": 0, "ignore_eos": True})
             for i in range(n)]
    lines.insert(5, "{bad json")
    inp, out = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    inp.write_text("\n".join(lines) + "\n")

    # A few requests at a time, so that the kill lands with results written and more to come.
    proc = subprocess.Popen(command(inp, out, "--max-concurrency", "4"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= 6:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "run-batch ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = out.read_text()
    complete = first[: first.rfind("\n") + 1]
    done_before = {json.loads(l)["custom_id"] for l in complete.splitlines()}
    assert 0 < len(done_before) < n + 1
    # As if the kill had come in the middle of a write.
    out.write_text(complete + '{"id": "batch_req_x", "custom_id": "r')

    summary = run_batch(inp, out)
    assert f"skipped        {len(complete.splitlines())}" in summary, summary
    text = out.read_text()
    assert text.startswith(complete), "a resume must keep the finished lines as they were"
    results = read_results(out)
    ids = [r["custom_id"] for r in results]
    assert sorted(i for i in ids if i is not None) == sorted(f"r{i}" for i in range(n))
    assert ids.count(None) == 1, "the bad line is reported once"
    for r in results:
        if r["custom_id"] is not None:
            assert r["response"]["status_code"] == 200
            assert r["response"]["body"]["usage"]["completion_tokens"] == 48

    # Everything done: a third run sends nothing and changes nothing.
    summary = run_batch(inp, out)
    assert out.read_text() == text
    assert "requests       0 (" in summary, summary


def test_retry_failed_runs_exactly_the_failed_lines_again_after_they_are_fixed(tmp_path, http):
    reqs = good_requests()
    ok_ids = list(reqs)[:3]
    fixed_body = {"model": MODEL_NAME, "prompt": "The capital of Italy is", "max_tokens": 8,
                  "temperature": 0}
    lines = [line(cid, *reqs[cid]) for cid in ok_ids]
    # A field the server refuses (400), a line that is not JSON, a model not served (404).
    lines.append(line("typo", COMP, {**fixed_body, "max_tokenz": 8}))
    lines.append('{"custom_id": "cut", "method": "POST", "url": "/v1/completions", "body": {')
    lines.append(line("other-model", COMP, {**fixed_body, "model": "gpt-17"}))
    inp, out = tmp_path / "requests.jsonl", tmp_path / "results.jsonl"
    inp.write_text("\n".join(lines) + "\n")
    summary = run_batch(inp, out)
    assert "6 (3 ok, 3 failed" in summary, summary
    first = out.read_text()
    kept = [l for l in first.splitlines() if json.loads(l)["custom_id"] in ok_ids]
    assert len(kept) == 3

    # The user fixes two of the three lines in place.
    lines[3] = line("typo", COMP, fixed_body)
    lines[4] = line("cut", COMP, {**fixed_body, "prompt": "The capital of Spain is"})
    inp.write_text("\n".join(lines) + "\n")

    # A plain resume takes every result as done: nothing is sent, nothing changes.
    summary = run_batch(inp, out)
    assert "requests       0 (" in summary, summary
    assert out.read_text() == first

    summary = run_batch(inp, out, "--retry-failed")
    assert "requests       3 (2 ok, 1 failed" in summary, summary
    assert "retried        3" in summary, summary
    assert "skipped        3" in summary, summary
    text = out.read_text()
    # The successful results are kept as they were, byte for byte, ahead of the new ones.
    assert text.splitlines()[:3] == kept
    results = read_results(out)
    ids = [r["custom_id"] for r in results]
    assert sorted(ids) == sorted(ok_ids + ["typo", "cut", "other-model"]), ids
    by_id = {r["custom_id"]: r for r in results}
    assert by_id["other-model"]["response"]["status_code"] == 404
    for cid, prompt in [("typo", "The capital of Italy is"), ("cut", "The capital of Spain is")]:
        r = by_id[cid]
        assert r["error"] is None and r["response"]["status_code"] == 200, r
        served = http.post(COMP, json={**fixed_body, "prompt": prompt})
        assert answer_text(r["response"]["body"]) == answer_text(served.json()), cid

    # Retrying again sends only the line that still fails.
    summary = run_batch(inp, out, "--retry-failed")
    assert "requests       1 (0 ok, 1 failed" in summary, summary
    assert len(read_results(out)) == 6
    assert not list(tmp_path.glob(".*.tmp")), "the rewrite's temporary file is gone"


def test_model_flag_runs_a_file_written_for_openai(tmp_path, http):
    """An OpenAI batch file names gpt-4o-mini in every body: with the positional MODEL each line
    is a 404, with --model every line goes to the model served, as if the body named it."""
    reqs = good_requests()
    lines = [line(cid, url, {**body, "model": "gpt-4o-mini"}) for cid, (url, body) in reqs.items()]
    # `model` is optional here (as in vLLM): a body without it runs either way.
    lines.append(line("no-model", COMP, {"prompt": "Hello", "max_tokens": 4, "temperature": 0}))
    inp, out = tmp_path / "openai.jsonl", tmp_path / "results.jsonl"
    inp.write_text("\n".join(lines) + "\n")

    summary = run_batch(inp, out)
    n = len(reqs)
    assert f"requests       {n + 1} (1 ok, {n} failed" in summary, summary
    results = read_results(out)
    assert {r["response"]["status_code"] for r in results if r["custom_id"] != "no-model"} == {404}
    assert "gpt-4o-mini" in results[0]["response"]["body"]["error"]["message"]
    assert f"hint           {n} bodies name another model" in summary, summary

    summary = run_batch(inp, out, "--retry-failed", model_flag=True)
    assert f"requests       {n} ({n} ok, 0 failed" in summary, summary
    assert "hint" not in summary
    by_id = {r["custom_id"]: r for r in read_results(out)}
    assert len(by_id) == n + 1 and len(read_results(out)) == n + 1
    for cid, (url, body) in reqs.items():
        r = by_id[cid]["response"]
        assert r["status_code"] == 200 and r["body"]["model"] == MODEL_NAME, r
        served = http.post(url, json=body)
        assert answer_text(r["body"]) == answer_text(served.json()), cid
