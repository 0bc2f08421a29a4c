#!/usr/bin/env python3
"""fixtures/arch/gpt_oss_mxfp4/model.gguf: the MXFP4 gpt-oss fixture as llama.cpp's own converter
writes it (`gpt-oss`: MXFP4 experts re-laid into GGML blocks with gate and up split, biases
split the same way, sinks as `attn_sinks.weight`, everything else bf16), with the minimal
byte-level BPE tokenizer of make_hybrid_gguf_fixtures.py (vocabulary 256) and its one patch
(the pre-tokenizer named "gpt-4o", as gpt-oss's GGUFs carry, since a 256-token vocabulary
matches no hash the converter knows).

    python3 scripts/make_gpt_oss_gguf_fixture.py LLAMA_CPP_DIR   (llama.cpp ec562eb673ab)
"""
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import make_hybrid_gguf_fixtures as hybrid

SRC = hybrid.FIXTURES / "gpt_oss_mxfp4"


def main():
    llama_dir = Path(sys.argv[1]).resolve()
    cfg = json.loads((SRC / "config.json").read_text())
    out = SRC / "model.gguf"
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "gpt_oss"
        d.mkdir()
        for f in ["config.json", "generation_config.json", "model.safetensors"]:
            shutil.copy2(SRC / f, d / f)
        tok, tok_cfg = hybrid.make_tokenizer(cfg["vocab_size"], hybrid.QWEN2_REGEX)
        (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False, indent=1))
        (d / "tokenizer_config.json").write_text(json.dumps(tok_cfg, indent=1))
        subprocess.run([sys.executable, "-c", hybrid.BOOTSTRAP, str(llama_dir), "gpt-4o", str(d),
                        "--outtype", "bf16", "--outfile", str(out)], check=True)
    sys.path.insert(0, str(llama_dir / "gguf-py"))
    import gguf
    r = gguf.GGUFReader(out)
    for f in r.fields.values():
        if f.name.startswith("gpt-oss."):
            print(f.name, f.contents())
    for t in r.tensors:
        if t.name.startswith("blk.0.") or not t.name.startswith("blk."):
            print(t.name, list(t.shape), t.tensor_type.name)


if __name__ == "__main__":
    main()
