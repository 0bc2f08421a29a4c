#!/usr/bin/env python3
"""A Hugging Face model directory made by transformers from a GGUF file, for ferrite's
safetensors-loader test: transformers dequantizes the GGUF and undoes llama.cpp's Q/K
permutation, so ferrite loading this directory must give back the GGUF's weights.

Saved in bf16 and sharded (to exercise model.safetensors.index.json).
Usage: python scripts/make_hf_test_dir.py GGUF_FILE OUT_DIR
Needs torch, transformers and gguf (e.g. /work/refenv/bin/python).
"""
import pathlib
import shutil
import sys

import json

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

SHARD_BYTES = 100 << 20


def save_sharded(model, out):
    """save_pretrained refuses a GGUF-loaded model, so write the shards and index ourselves."""
    tied = model.config.tie_word_embeddings
    tensors = {k: v.contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    shards, current, size = [], {}, 0
    for name, t in tensors.items():
        if current and size + t.numel() * t.element_size() > SHARD_BYTES:
            shards.append(current)
            current, size = {}, 0
        current[name] = t
        size += t.numel() * t.element_size()
    shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, out / file, metadata={"format": "pt"})
        weight_map.update({name: file for name in shard})
    total = sum(t.numel() * t.element_size() for t in tensors.values())
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=1))
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    (out / "config.json").write_text(json.dumps(config, indent=1))


def main():
    gguf, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16)
    tmp.mkdir(parents=True)
    save_sharded(model, tmp)
    AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name).save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
