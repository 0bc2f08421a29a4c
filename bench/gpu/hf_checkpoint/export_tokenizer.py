"""Here, before packing: the tokenizer of a GGUF file as JSON (its tokenizer.ggml.* metadata) and
its Hugging Face tokenizer files, for write_checkpoint.py on the device (which has no gguf
package and no internet). Usage: export_tokenizer.py MODEL.gguf HF_DIR OUT_DIR"""
import json
import shutil
import sys
from pathlib import Path

import gguf

src, hf_dir, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
out.mkdir(parents=True, exist_ok=True)
reader = gguf.GGUFReader(src)
meta = {}
for name, field in reader.fields.items():
    if not name.startswith("tokenizer.ggml."):
        continue
    kind = field.types[0]
    if kind == gguf.GGUFValueType.ARRAY:
        inner = field.types[1]
        values = [field.parts[i] for i in field.data]
        if inner == gguf.GGUFValueType.STRING:
            meta[name] = ["string", [bytes(v).decode("utf-8") for v in values]]
        else:
            meta[name] = ["int32", [int(v[0]) for v in values]]
    elif kind == gguf.GGUFValueType.STRING:
        meta[name] = ["string", bytes(field.parts[field.data[0]]).decode("utf-8")]
    elif kind == gguf.GGUFValueType.BOOL:
        meta[name] = ["bool", bool(field.parts[field.data[0]][0])]
    else:
        meta[name] = ["uint32", int(field.parts[field.data[0]][0])]
(out / "tokenizer_meta.json").write_text(json.dumps(meta))
for f in ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]:
    if (hf_dir / f).exists():
        shutil.copy(hf_dir / f, out / f)
print("exported", len(meta), "tokenizer fields to", out)
