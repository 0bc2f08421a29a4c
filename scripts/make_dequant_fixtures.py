#!/usr/bin/env python3
"""Random quantized blocks and their dequantization by the python `gguf` package
(`gguf.quants.dequantize`): the oracle for the dequantizers in crates/cpu/src/quant and
crates/model/src/dequant.rs.

Usage: /work/refenv/bin/python scripts/make_dequant_fixtures.py
Writes fixtures/dequant/{TYPE}.json = {"type", "hex" (the stored bytes), "values" (f32)}.
"""
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize

OUT = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "dequant"

# Byte offsets of the f16 scale fields in each block: random bytes there could be NaN/inf,
# so they are overwritten with finite scales.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
BLOCKS = 2
FLOATS = 40


def write(qtype_name, raw, values):
    doc = {"type": qtype_name, "hex": raw.tobytes().hex(), "values": [float(f"{v:.9g}") for v in values]}
    (OUT / f"{qtype_name}.json").write_text(json.dumps(doc) + "\n")


def main():
    rng = np.random.default_rng(20261202)
    OUT.mkdir(parents=True, exist_ok=True)
    for qtype, fields in F16_FIELDS.items():
        _, block_bytes = GGML_QUANT_SIZES[qtype]
        raw = rng.integers(0, 256, size=(BLOCKS, block_bytes), dtype=np.uint8)
        for off in fields:
            scales = rng.uniform(-0.5, 0.5, size=BLOCKS).astype(np.float16)
            raw[:, off:off + 2] = scales.view(np.uint8).reshape(BLOCKS, 2)
        raw = raw.reshape(-1)
        write(qtype.name, raw, dequantize(raw, qtype).astype(np.float32))
    for qtype, np_type in ((T.F32, np.float32), (T.F16, np.float16)):
        raw = rng.normal(size=FLOATS).astype(np_type).view(np.uint8)
        write(qtype.name, raw, dequantize(raw, qtype).astype(np.float32))
    # BF16: the upper halves of random f32s.
    raw = (rng.normal(size=FLOATS).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    write("BF16", raw, dequantize(raw, T.BF16).astype(np.float32))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
