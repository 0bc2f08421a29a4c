#!/usr/bin/env python3
"""Records a model's greedy answers to a workload as token ids, for
`crates/engine/examples/spec_replay.rs` (which replays them through a proposer without the model).

    bench/spec/record_greedy.py MODEL.gguf WORKLOAD.jsonl OUT.jsonl [FERRITE]

WORKLOAD.jsonl: one chat request per line ({"messages": [...], "max_tokens": N}, as
bench/spec_cpu.sh writes them). OUT.jsonl: one {"prompt": [ids], "output": [ids]} per request,
from a plain (non-speculative) `ferrite serve` with "return_token_ids": true.
"""
import json
import subprocess
import sys
import time
import urllib.request

PORT = 18555


def main():
    model, workload, out = sys.argv[1:4]
    ferrite = sys.argv[4] if len(sys.argv) > 4 else "target/release/ferrite"
    server = subprocess.Popen(
        [ferrite, "serve", model, "--port", str(PORT), "--threads", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{PORT}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.5)
        name = json.load(urllib.request.urlopen(f"{base}/v1/models"))["data"][0]["id"]
        with open(out, "w") as f:
            for line in open(workload):
                req = json.loads(line)
                body = {
                    "model": name,
                    "messages": req["messages"],
                    "max_tokens": req.get("max_tokens", 384),
                    "temperature": 0,
                    "return_token_ids": True,
                }
                r = urllib.request.Request(
                    f"{base}/v1/chat/completions",
                    data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"},
                )
                resp = json.load(urllib.request.urlopen(r, timeout=900))
                record = {"prompt": resp["prompt_token_ids"], "output": resp["choices"][0]["token_ids"]}
                f.write(json.dumps(record) + "\n")
                print(f"prompt {len(record['prompt'])} tokens, output {len(record['output'])}", flush=True)
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
