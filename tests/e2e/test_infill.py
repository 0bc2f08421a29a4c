"""llama-server's `/infill` (what llama.vim and llama.vscode send) on Qwen2.5-Coder-0.5B, over
HTTP. Oracles: the prompt laid out by hand from llama-server's documented repository-level
format (`[repo_name]myproject\\n` + `[file_sep]name\\n text` per extra file + `[file_sep]filename\\n`
+ `[fim_prefix] prefix prompt [fim_suffix] suffix [fim_middle]`), sent as token ids to
/v1/completions, must give the same greedy tokens; `n_indent` and `t_max_predict_ms` cut the
unconstrained greedy text where their rules say; a stream adds up to the whole answer."""

import json

import httpx
import pytest

from conftest import QWEN_NAME

PREFIX = "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"
PROMPT = "    if n"
SUFFIX = "\n\nprint(fibonacci(10))\n"
EXTRA = [{"filename": "util.py", "text": "def square(x):\n    return x * x\n"},
         {"filename": "main.py", "text": "from util import square\n"}]


@pytest.fixture(scope="module")
def qhttp(qwen_server):
    with httpx.Client(base_url=qwen_server.url, timeout=120) as c:
        yield c


def ids(qhttp, text):
    r = qhttp.post("/tokenize", json={"prompt": text, "add_special_tokens": False})
    r.raise_for_status()
    return r.json()["tokens"]


def special(qhttp, spelling):
    t = ids(qhttp, spelling)
    assert len(t) == 1, (spelling, t)
    return t[0]


def infill(qhttp, **body):
    r = qhttp.post("/infill", json={"input_prefix": PREFIX, "input_suffix": SUFFIX, "prompt": PROMPT,
                                    "temperature": 0, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_the_prompt_is_llama_servers_repository_layout(qhttp):
    sep = special(qhttp, "<|file_sep|>")
    want = [special(qhttp, "<|repo_name|>"), *ids(qhttp, "myproject\n")]
    for chunk in EXTRA:
        want += [sep, *ids(qhttp, chunk["filename"] + "\n"), *ids(qhttp, chunk["text"])]
    want += [sep, *ids(qhttp, "filename\n")]
    want += [special(qhttp, "<|fim_prefix|>"), *ids(qhttp, PREFIX), *ids(qhttp, PROMPT),
             special(qhttp, "<|fim_suffix|>"), *ids(qhttp, SUFFIX), special(qhttp, "<|fim_middle|>")]
    got = infill(qhttp, input_extra=EXTRA, n_predict=24, ignore_eos=True, return_tokens=True)
    assert got["tokens_evaluated"] == len(want)
    ref = qhttp.post("/v1/completions", json={"model": QWEN_NAME, "prompt": want, "max_tokens": 24,
                                              "temperature": 0, "ignore_eos": True,
                                              "return_token_ids": True}).json()
    assert got["tokens"] == ref["choices"][0]["token_ids"]
    assert got["content"] == ref["choices"][0]["text"]
    assert got["stop"] is True and got["stop_type"] == "limit" and got["tokens_predicted"] == 24
    assert got["model"] == QWEN_NAME and got["timings"]["predicted_n"] == 24


def test_a_stream_adds_up_to_the_whole_answer(qhttp):
    whole = infill(qhttp, n_predict=20, ignore_eos=True)
    events = []
    with qhttp.stream("POST", "/infill", json={"input_prefix": PREFIX, "input_suffix": SUFFIX,
                                               "prompt": PROMPT, "temperature": 0, "n_predict": 20,
                                               "ignore_eos": True, "stream": True}) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[len("data: "):]))
    *partials, last = events
    assert all(not e["stop"] for e in partials) and last["stop"] is True
    assert "".join(e["content"] for e in partials) == whole["content"]
    assert last["content"] == "" and last["tokens_predicted"] == 20


def test_n_indent_cuts_before_the_first_line_indented_less(qhttp):
    free = infill(qhttp, n_predict=64, ignore_eos=True)["content"]
    # The body is indented by 4. llama-server's rule: a line after the first whose spaces and
    # tabs are followed by anything else (a new line too: an empty line ends a block) and
    # number fewer than n_indent ends the text before that anything.
    lines = free.split("\n")
    cut = None
    for i, line in enumerate(lines[1:], 1):
        indent = len(line) - len(line.lstrip(" \t"))
        visible = indent < len(line) or i < len(lines) - 1
        if visible and indent < 4:
            cut = len("\n".join(lines[:i])) + 1 + indent
            break
    assert cut is not None, f"the free text never leaves the body: {free!r}"
    got = infill(qhttp, n_predict=64, ignore_eos=True, n_indent=4)
    assert got["content"] == free[:cut], (got["content"], free)
    assert got["stop_type"] == "limit"


def test_t_max_predict_ms_ends_at_a_new_line_once_past_the_time(qhttp):
    free = infill(qhttp, n_predict=64, ignore_eos=True)["content"]
    assert free.count("\n") >= 2, free
    got = infill(qhttp, n_predict=64, ignore_eos=True, t_max_predict_ms=1)
    assert got["content"].endswith("\n") and free.startswith(got["content"])
    assert len(got["content"]) < len(free) and got["stop_type"] == "limit"


def test_stop_words_response_fields_and_a_prompt_only_request(qhttp):
    got = infill(qhttp, n_predict=64, stop=["\n"])
    assert got["stop_type"] == "word" and got["stopping_word"] == "\n" and "\n" not in got["content"]
    picked = infill(qhttp, n_predict=4, response_fields=["content", "timings/predicted_n", "nope"])
    assert set(picked) == {"content", "timings/predicted_n"}
    # n_predict 0 (llama.vim's cache warm-up): the prompt is read, nothing is generated, and the
    # next request with that prompt finds it cached.
    extra = [{"filename": "warm.py", "text": "WARM = [" + ", ".join(str(i) for i in range(200)) + "]\n"}]
    warm = infill(qhttp, n_predict=0, input_extra=extra)
    assert warm["content"] == "" and warm["tokens_predicted"] == 0
    again = infill(qhttp, n_predict=1, input_extra=extra)
    assert again["tokens_cached"] >= 0.9 * again["tokens_evaluated"], again


@pytest.mark.parametrize("body,param", [
    ({"samplers": ["top_k", "dry"]}, "samplers"),
    ({"samplers": ["infill", "top_k"]}, "samplers"),
    ({"samplers": ["top_p", "temperature"], "temperature": 0.5, "top_p": 0.9}, "samplers"),
    ({"cache_prompt": False}, "cache_prompt"),
    ({"id_slot": 1}, "id_slot"),
    ({"n_probs": 3}, "n_probs"),
])
def test_what_ferrite_cannot_do_is_a_400_naming_the_field(qhttp, body, param):
    r = qhttp.post("/infill", json={"input_prefix": PREFIX, **body})
    assert r.status_code == 400 and r.json()["error"]["param"] == param, r.text


def test_llama_vim_s_request_is_served(qhttp):
    # llama.vim's body (its samplers end with llama.cpp's `infill`).
    got = infill(qhttp, input_extra=EXTRA, n_predict=16, top_k=40, top_p=0.9,
                 samplers=["top_k", "top_p", "infill"], stream=False, cache_prompt=True, t_max_prompt_ms=500,
                 t_max_predict_ms=1000, n_indent=4,
                 response_fields=["content", "timings/prompt_n", "timings/predicted_ms", "truncated",
                                  "tokens_cached"])
    assert set(got) == {"content", "timings/prompt_n", "timings/predicted_ms", "truncated",
                        "tokens_cached"}


def test_a_model_without_fim_tokens_is_a_400(http):
    r = http.post("/infill", json={"input_prefix": "def f(", "input_suffix": ")\n"})
    assert r.status_code == 400 and "fill-in-the-middle" in r.json()["error"]["message"], r.text
