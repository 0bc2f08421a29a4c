"""EAGLE-3 served (issue 39): a real model served plain and with a trained EAGLE-3 head
(bench/gpu/train_eagle3.py), on the CPU or on CUDA, on the held-out prompts of three workloads
(bench/eagle3/*.jsonl: chat, code, edits; prompts the head never saw in training). Python's
standard library only (it runs on the GPU machine too).

    python bench/eagle3_serve.py --head DIR [--model FILE.gguf] [--out DIR] [--threads N]
                                 [--device cpu|cuda] [--binary PATH]

1. Exactness: every held-out prompt answered greedily (chat template, 128 tokens) by the plain
   server and by each speculative one (/v1/chat/completions): the same text.
2. Batch 1, per workload: output tokens/s of `ferrite bench` (replay of the workload's prompts,
   one at a time, temperature 0), the speculative servers' acceptance from their /metrics
   (tokens per verification step = 1 + accepted / drafts, drafts per step = draft tokens /
   drafts), and the speed-up over plain.
3. Concurrency 1 / 4 / 16 / 64 over all three workloads' prompts (repeated to 2x the
   concurrency when fewer): output tokens/s, p50 and p99 inter-token latency (gaps between
   token-carrying chunks) and p50 time per output token, speculative / plain.

Speculative servers: `eagle3` (the default policy: k chosen per step from measured costs, off
where it does not pay) and `eagle3-k3` (always 3 drafts). Writes results.json and results.md
under --out and prints the tables.
"""

import argparse
import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = ["chat", "code", "edits"]
SPEC_METRICS = ["ferrite:spec_decode_num_drafts_total", "ferrite:spec_decode_num_draft_tokens_total",
                "ferrite:spec_decode_num_accepted_tokens_total"]


def http(url, body=None, timeout=600):
    """GET (or POST `body` as JSON) `url`: the status and the response text."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary, model, name, extra, out, threads, device):
        self.name, self.port = name, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(out / f"{name}.log", "w")
        args = [binary, "serve", str(model), "--port", str(self.port), "--served-model-name", "m",
                "--kv-cache-memory", "1GiB", "--max-num-seqs", "64", "--device", device, *extra]
        if threads:
            args += ["--threads", str(threads)]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(600):
            try:
                if http(self.url + "/health", timeout=2)[0] == 200:
                    return
            except (urllib.error.URLError, OSError):
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"{name} exited: see {out / (name + '.log')}")
            time.sleep(0.5)
        raise SystemExit(f"{name} did not become healthy")

    def metrics(self):
        values = {}
        for line in http(self.url + "/metrics")[1].splitlines():
            for m in SPEC_METRICS:
                if line.startswith(m + " ") or line.startswith(m + "{"):
                    values[m] = values.get(m, 0.0) + float(line.rsplit(" ", 1)[1])
        return values

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def prompts(workload):
    return [json.loads(l) for l in (ROOT / "bench/eagle3" / f"{workload}.jsonl").read_text().splitlines()]


def answers(server, rows):
    out = []
    for r in rows:
        body = {"model": "m", "messages": r["messages"], "max_tokens": r["max_tokens"], "temperature": 0}
        reply = json.loads(http(server.url + "/v1/chat/completions", body)[1])
        out.append(reply["choices"][0]["message"]["content"])
    return out


def bench(binary, server, dataset, concurrency, out, tag):
    report = out / f"{tag}.json"
    subprocess.run([binary, "bench", "--url", server.url, "--model", "m", "--endpoint", "chat",
                    "--workload", "replay", "--dataset", str(dataset), "--max-concurrency",
                    str(concurrency), "--temperature", "0", "--json", "--output", str(report),
                    "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    r = json.loads(report.read_text())
    return {"tok_s": r["output_token_throughput"], "itl_p50": r["itl_ms"]["p50"],
            "itl_p99": r["itl_ms"]["p99"], "tpot_p50": r["tpot_ms"]["p50"],
            "completed": r["completed"], "failed": r["failed"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--head", required=True, type=Path)
    ap.add_argument("--model", type=Path, default=Path(os.environ.get(
        "FERRITE_MODELS", Path.home() / ".cache/ferrite/models")) / "SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--out", type=Path, default=Path("eagle3-results"))
    ap.add_argument("--binary", default=str(ROOT / "target/release/ferrite"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--concurrency", default="1,4,16,64")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    head = ["--speculative", "eagle3", "--draft-model", str(args.head)]
    on = (args.out, args.threads, args.device)
    servers = {
        "plain": Server(args.binary, args.model, "plain", [], *on),
        "eagle3": Server(args.binary, args.model, "eagle3", head, *on),
        "eagle3-k3": Server(args.binary, args.model, "eagle3-k3",
                            head + ["--speculative-fixed-k", "--num-speculative-tokens", "3"], *on),
    }
    results = {"exact": {}, "batch1": {}, "sweep": {}}
    try:
        for w in WORKLOADS:
            rows = prompts(w)
            want = answers(servers["plain"], rows)
            for name in ["eagle3", "eagle3-k3"]:
                got = answers(servers[name], rows)
                same = sum(a == b for a, b in zip(got, want))
                results["exact"][f"{w}/{name}"] = f"{same}/{len(rows)}"
        for w in WORKLOADS:
            dataset = ROOT / "bench/eagle3" / f"{w}.jsonl"
            for name, server in servers.items():
                before = server.metrics()
                r = bench(args.binary, server, dataset, 1, args.out, f"{w}-c1-{name}")
                after = server.metrics()
                d = {m: after.get(m, 0) - before.get(m, 0) for m in SPEC_METRICS}
                if d[SPEC_METRICS[0]] > 0:
                    r["tokens_per_step"] = 1 + d[SPEC_METRICS[2]] / d[SPEC_METRICS[0]]
                    r["drafts_per_step"] = d[SPEC_METRICS[1]] / d[SPEC_METRICS[0]]
                results["batch1"][f"{w}/{name}"] = r
        every = [l for w in WORKLOADS for l in (ROOT / "bench/eagle3" / f"{w}.jsonl").read_text().splitlines()]
        for c in [int(x) for x in args.concurrency.split(",")]:
            lines = every * max(1, -(-2 * c // len(every)))
            dataset = args.out / f"all-{c}.jsonl"
            dataset.write_text("\n".join(lines) + "\n")
            for name, server in servers.items():
                results["sweep"][f"{c}/{name}"] = bench(args.binary, server, dataset, c, args.out,
                                                        f"all-c{c}-{name}")
    finally:
        for s in servers.values():
            s.stop()
    md = ["| check | result |", "|---|---|"]
    md += [f"| greedy text identical, {k} | {v} |" for k, v in results["exact"].items()]
    md += ["", "| workload (batch 1) | server | tok/s | vs plain | tokens per verification | drafts per step |",
           "|---|---|---|---|---|---|"]
    for w in WORKLOADS:
        base = results["batch1"][f"{w}/plain"]["tok_s"]
        for name in servers:
            r = results["batch1"][f"{w}/{name}"]
            md.append(f"| {w} | {name} | {r['tok_s']:.1f} | {r['tok_s'] / base:.2f}x | "
                      f"{r.get('tokens_per_step', float('nan')):.2f} | {r.get('drafts_per_step', float('nan')):.2f} |")
    md += ["", "| concurrency | server | tok/s | vs plain | ITL p50 ms | ITL p99 ms | TPOT p50 ms | TPOT vs plain |",
           "|---|---|---|---|---|---|---|---|"]
    for key, r in results["sweep"].items():
        c, name = key.split("/")
        base = results["sweep"][f"{c}/plain"]
        md.append(f"| {c} | {name} | {r['tok_s']:.1f} | {r['tok_s'] / base['tok_s']:.2f}x | "
                  f"{r['itl_p50']:.1f} | {r['itl_p99']:.1f} | {r['tpot_p50']:.2f} | "
                  f"{base['tpot_p50'] / r['tpot_p50']:.2f}x |")
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (args.out / "results.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
