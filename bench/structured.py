"""Structured outputs' cost (issue 14): time to first token and decode speed of chat requests
constrained by a 50-property JSON schema against the same requests unconstrained, at
concurrency 1 and 16, through `ferrite serve`'s streaming API.

Every constrained request carries a schema the server has not seen (one property name differs
per request), so its grammar is compiled on first use: the TTFT includes the compilation.
Rounds alternate constrained and unconstrained batches so both see the same machine load.

Usage: bench/structured.py [--model PATH] [--rounds N] [--max-tokens N] [--bin ferrite]
Prints one line per concurrency with both means and the ratios; --json FILE keeps the raw data.
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import time
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parents[1]
MODELS = Path(os.environ.get("FERRITE_MODELS", Path.home() / ".cache/ferrite/models"))
PROMPT = [{"role": "user", "content": "Fill in the inventory record for a small hardware shop."}]


def schema(salt: int) -> dict:
    """50 properties of mixed types; `salt` renames one so that no two requests share it."""
    kinds = [{"type": "integer", "minimum": 0, "maximum": 1000}, {"type": "boolean"},
             {"type": "string", "maxLength": 12}, {"enum": ["low", "medium", "high"]},
             {"type": "number"}]
    props = {f"field_{i}": kinds[i % len(kinds)] for i in range(49)}
    props[f"tag_{salt}"] = {"type": "string", "maxLength": 8}
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


async def one(client, model, max_tokens, salt=None):
    extra = {}
    if salt is not None:
        extra["response_format"] = {"type": "json_schema",
                                    "json_schema": {"name": "record", "schema": schema(salt)}}
    start = time.perf_counter()
    first = last = None
    tokens = 0
    stream = await client.chat.completions.create(
        model=model, messages=PROMPT, max_tokens=max_tokens, temperature=0, stream=True,
        stream_options={"include_usage": True}, **extra)
    async for chunk in stream:
        now = time.perf_counter()
        if chunk.choices and (chunk.choices[0].delta.content or ""):
            first = first or now
            last = now
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
    ttft = first - start
    decode = (tokens - 1) / (last - first) if tokens > 1 and last > first else float("nan")
    return ttft, decode, tokens


async def run(args, port):
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_retries=0)
    model = (await client.models.list()).data[0].id
    await one(client, model, 8)  # warm-up, unconstrained
    await one(client, model, 8, salt=10**6)  # builds the token trie once (a startup cost)
    results = {}
    salt = 0
    for conc in (1, 16):
        rows = {"plain": [], "schema": []}
        for _ in range(args.rounds):
            for kind in ("plain", "schema"):
                salts = [None] * conc
                if kind == "schema":
                    salts = list(range(salt, salt + conc))
                    salt += conc
                rows[kind] += await asyncio.gather(
                    *(one(client, model, args.max_tokens, s) for s in salts))
        summary = {}
        for kind, rs in rows.items():
            summary[kind] = {
                "ttft_s": statistics.mean(r[0] for r in rs),
                "decode_tok_s": statistics.mean(r[1] for r in rs),
                "tokens": statistics.mean(r[2] for r in rs),
            }
        p, s = summary["plain"], summary["schema"]
        print(f"concurrency {conc:2d}: TTFT plain {p['ttft_s'] * 1e3:7.1f} ms, schema "
              f"{s['ttft_s'] * 1e3:7.1f} ms (x{s['ttft_s'] / p['ttft_s']:.2f}, target <= 1.2); "
              f"decode per request plain {p['decode_tok_s']:.1f} tok/s, schema "
              f"{s['decode_tok_s']:.1f} tok/s (x{s['decode_tok_s'] / p['decode_tok_s']:.3f}, "
              f"target >= 0.95); mean tokens {p['tokens']:.0f} / {s['tokens']:.0f}", flush=True)
        results[conc] = summary
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--bin", default=os.environ.get("FERRITE_BIN", str(ROOT / "target/release/ferrite")))
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("serve_args", nargs="*", help="more `ferrite serve` arguments (after --)")
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([args.bin, "serve", args.model, "--port", str(port), *args.serve_args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline or server.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.2)
        results = asyncio.run(run(args, port))
    finally:
        server.terminate()
        server.wait()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


main()
