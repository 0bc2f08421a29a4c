"""`ferrite doctor MODEL`: passes on the test models (GGUF files and a Hugging Face directory),
and on broken copies made here names each problem with the exit status scripts read (1 for an
error, 0 when there are only warnings): template removed, EOS ids that disagree or lie outside
the vocabulary, a tokenizer larger than the embedding, a tensor missing (a safetensors shard
rewritten without it, a GGUF rewritten with the `gguf` package), a model too large for
--memory, a template that does not compile or writes a token the tokenizer lacks."""

import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import MODEL_FILE, QWEN_FILE, ROOT, models_dir
from test_hub import hf_dir_of

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
CHECKS = ["model", "chat template", "round trip", "stop ids", "special tokens", "vocabulary",
          "memory", "backend", "generation"]


def binary():
    return os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite"))


def doctor(model, *extra):
    cmd = [binary(), "doctor", str(model), *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert "panicked" not in r.stderr, r.stderr
    return r


def lines(result):
    """{check name: (status, line)} of a run's output."""
    out = {}
    for line in result.stdout.splitlines():
        parts = line.split(maxsplit=1)
        if len(parts) == 2 and parts[0] in ("ok", "warning", "error", "skipped"):
            name = next((c for c in CHECKS if parts[1].startswith(c + " ")), None)
            if name is not None:
                out[name] = (parts[0], line)
    return out


def status(result, check):
    found = lines(result)
    assert check in found, f"no {check} line:\n{result.stdout}\n{result.stderr}"
    return found[check]


def gguf_path(name):
    path = models_dir() / name
    if not path.is_file():
        pytest.fail(f"{path} is missing: run scripts/fetch_models.sh")
    return path


@pytest.mark.parametrize("model_file", [MODEL_FILE, QWEN_FILE, GEMMA_FILE],
                         ids=["smollm2", "qwen2.5-0.5b", "gemma3-base"])
def test_the_test_models_pass(model_file):
    r = doctor(gguf_path(model_file))
    assert r.returncode == 0, r.stdout + r.stderr
    found = lines(r)
    assert set(found) == set(CHECKS), r.stdout
    assert not [l for s, l in found.values() if s in ("error", "skipped")
                and not l.startswith("skipped  round trip")], r.stdout
    assert "greedy tokens" in found["generation"][1]
    if model_file == GEMMA_FILE:
        # A base model: no chat template is a warning, and the greedy run takes a plain prompt.
        assert found["chat template"][0] == "warning"
        assert "completion prompt" in found["generation"][1]
    else:
        assert all(s == "ok" for s, _ in found.values()), r.stdout
        assert "Paris" in found["generation"][1], r.stdout
    if model_file == QWEN_FILE:
        assert "tools, a tool call, a tool result" in found["chat template"][1]


def test_a_hugging_face_directory_passes_and_json_says_the_same():
    directory = hf_dir_of(MODEL_FILE)
    r = doctor(directory)
    assert r.returncode == 0, r.stdout + r.stderr
    stop = status(r, "stop ids")[1]
    for source in ("tokenizer_config.json", "generation_config.json", "config.json"):
        assert source in stop, stop
    j = doctor(directory, "--json")
    assert j.returncode == 0
    report = json.loads(j.stdout)
    assert [c["name"] for c in report["checks"]] == CHECKS
    assert all(c["status"] == "ok" for c in report["checks"]), report


def broken_copy(tmp_path: Path) -> Path:
    """A copy of SmolLM2's directory: the small files copied (to be broken), the shards linked."""
    source = hf_dir_of(MODEL_FILE)
    out = tmp_path / "broken"
    out.mkdir()
    for f in source.iterdir():
        if f.suffix == ".safetensors":
            (out / f.name).symlink_to(f)
        else:
            shutil.copy(f, out / f.name)
    return out


def edit_json(path: Path, edit):
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data, indent=1))


def test_a_removed_template_is_a_warning(tmp_path):
    d = broken_copy(tmp_path)
    (d / "chat_template.jinja").unlink()
    edit_json(d / "tokenizer_config.json", lambda c: c.pop("chat_template", None))
    r = doctor(d)
    assert r.returncode == 0, r.stdout + r.stderr
    s, line = status(r, "chat template")
    assert s == "warning" and "no chat template" in line and "--chat-template" in line, line
    assert status(r, "generation")[0] == "ok"


def test_a_generation_config_that_disagrees_is_a_warning_naming_both(tmp_path):
    d = broken_copy(tmp_path)
    edit_json(d / "generation_config.json", lambda c: c.update(eos_token_id=[5]))
    r = doctor(d)
    assert r.returncode == 0, r.stdout + r.stderr
    s, line = status(r, "stop ids")
    assert s == "warning", line
    assert "generation_config.json eos_token_id [5]" in line, line
    assert 'tokenizer_config.json eos_token "<|im_end|>" [2]' in line, line


def test_an_eos_id_outside_the_vocabulary_is_an_error(tmp_path):
    d = broken_copy(tmp_path)
    edit_json(d / "generation_config.json", lambda c: c.update(eos_token_id=[2, 999999]))
    r = doctor(d)
    assert r.returncode == 1, r.stdout + r.stderr
    s, line = status(r, "stop ids")
    assert s == "error" and "[999999], outside the vocabulary" in line, line


def test_a_tokenizer_larger_than_the_embedding_is_an_error(tmp_path):
    d = broken_copy(tmp_path)
    extra = {"id": 49152, "content": "<|extra|>", "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
    edit_json(d / "tokenizer.json", lambda t: t["added_tokens"].append(extra))
    r = doctor(d)
    assert r.returncode == 1, r.stdout + r.stderr
    s, line = status(r, "vocabulary")
    assert s == "error" and "ids up to 49152" in line and "49152 rows" in line, line


def drop_safetensors_tensor(shard: Path, out: Path, name: str):
    """Writes `shard` without tensor `name` (safetensors: a length, a JSON header, the data)."""
    raw = shard.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    assert name in header, f"{name} is not in {shard}"
    del header[name]
    kept, offset = [], 0
    for key, info in sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                            key=lambda kv: kv[1]["data_offsets"][0]):
        start, end = info["data_offsets"]
        kept.append(data[start:end])
        info["data_offsets"] = [offset, offset + end - start]
        offset += end - start
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    out.write_bytes(struct.pack("<Q", len(blob)) + blob + b"".join(kept))


def test_a_tensor_missing_from_a_safetensors_checkpoint_is_named(tmp_path):
    d = broken_copy(tmp_path)
    dropped = "model.layers.9.self_attn.k_proj.weight"
    index = d / "model.safetensors.index.json"
    shard_name = json.loads(index.read_text())["weight_map"][dropped]
    shard = d / shard_name
    source = shard.resolve()
    shard.unlink()
    drop_safetensors_tensor(source, shard, dropped)
    edit_json(index, lambda i: i["weight_map"].pop(dropped))
    r = doctor(d)
    assert r.returncode == 1, r.stdout + r.stderr
    s, line = status(r, "backend")
    # Named as the loader names tensors (GGUF's canonical names).
    assert s == "error" and "blk.9.attn_k.weight" in line, line
    assert status(r, "generation")[0] == "skipped"


def rewrite_gguf(source: Path, out: Path, drop_tensor=None, drop_keys=(), set_ints=None):
    """A copy of a GGUF file through the `gguf` package (llama.cpp's), without a tensor or
    metadata keys, or with integer keys changed."""
    import gguf

    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(out, arch)
    set_ints = set_ints or {}
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        if field.name in drop_keys:
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = set_ints.get(field.name, field.contents())
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    tensors = [t for t in reader.tensors if t.name != drop_tensor]
    assert drop_tensor is None or len(tensors) == len(reader.tensors) - 1
    for t in tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in tensors:
        writer.write_tensor_data(t.data)
    writer.close()


def test_a_tensor_missing_from_a_gguf_is_named(tmp_path):
    out = tmp_path / "missing-tensor.gguf"
    rewrite_gguf(gguf_path(MODEL_FILE), out, drop_tensor="blk.3.ffn_down.weight")
    r = doctor(out)
    assert r.returncode == 1, r.stdout + r.stderr
    s, line = status(r, "backend")
    assert s == "error" and "blk.3.ffn_down.weight" in line, line
    # The rest of the file is fine.
    assert status(r, "stop ids")[0] == "ok"


def test_a_gguf_without_template_warns_and_one_with_an_eos_out_of_vocabulary_fails(tmp_path):
    no_template = tmp_path / "no-template.gguf"
    rewrite_gguf(gguf_path(MODEL_FILE), no_template, drop_keys=("tokenizer.chat_template",))
    r = doctor(no_template)
    assert r.returncode == 0, r.stdout + r.stderr
    assert status(r, "chat template")[0] == "warning"

    bad_eos = tmp_path / "bad-eos.gguf"
    rewrite_gguf(gguf_path(MODEL_FILE), bad_eos, set_ints={"tokenizer.ggml.eos_token_id": 60000})
    r = doctor(bad_eos)
    assert r.returncode == 1, r.stdout + r.stderr
    # The loader refuses the file, naming the key and the id.
    s, line = status(r, "model")
    assert s == "error" and "eos_token_id" in line and "60000" in line, line


def test_a_model_too_large_for_the_memory_given_is_an_error():
    r = doctor(gguf_path(MODEL_FILE), "--memory", "200MiB")
    assert r.returncode == 1, r.stdout + r.stderr
    s, line = status(r, "memory")
    assert s == "error" and "too large" in line, line
    # 200 MiB less SmolLM2's 92 MiB of weights holds ~2400 tokens of its 45 KiB per token.
    assert "--max-model-len" in line, line
    assert status(r, "backend")[0] == "skipped"
    # The same with a context that fits.
    r = doctor(gguf_path(MODEL_FILE), "--memory", "200MiB", "--max-model-len", "1024")
    assert r.returncode == 0, r.stdout + r.stderr
    assert status(r, "memory")[0] == "ok"


def test_a_broken_template_and_a_token_the_tokenizer_lacks_are_errors(tmp_path):
    r = doctor(gguf_path(MODEL_FILE), "--chat-template", "{% for m in messages %}{{ m.content }")
    assert r.returncode == 1, r.stdout + r.stderr
    assert status(r, "chat template")[0] == "error"
    template = tmp_path / "sep.jinja"
    template.write_text("{% for m in messages %}<|im_start|>{{ m.role }}<|im_sep|>"
                        "{{ m.content }}<|im_end|>\n{% endfor %}"
                        "{% if add_generation_prompt %}<|im_start|>assistant<|im_sep|>{% endif %}")
    r = doctor(gguf_path(MODEL_FILE), "--chat-template", str(template))
    assert r.returncode == 1, r.stdout + r.stderr
    s, line = status(r, "special tokens")
    assert s == "error" and "<|im_sep|> is not a token of the tokenizer" in line, line


def test_a_path_that_is_no_model_is_an_error():
    r = doctor("/nonexistent/model.gguf")
    assert r.returncode == 1
    assert status(r, "model")[0] == "error"
