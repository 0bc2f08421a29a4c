"""Tabulates a bench/spec_cpu.sh run directory: per workload and concurrency, each server's
output tokens/s and per-request decode tokens/s (1000 / mean TPOT in ms), the speedup over the
same engine's plain decoding, and for ferrite the mean acceptance length
(1 + accepted / drafts, from the /metrics counters before and after the run)."""

import json
import re
import subprocess
import sys
from pathlib import Path


def counter(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if re.match(rf"^{re.escape(name)}(\{{.*\}})? ", line):
            total += float(line.rsplit(" ", 1)[1])
    return total


def acceptance_length(report: Path):
    try:
        before = Path(str(report) + ".metrics-before").read_text()
        after = Path(str(report) + ".metrics-after").read_text()
    except OSError:
        return None
    name = "ferrite:spec_decode_num_{}_total"
    drafts = counter(after, name.format("drafts")) - counter(before, name.format("drafts"))
    accepted = counter(after, name.format("accepted_tokens")) - counter(
        before, name.format("accepted_tokens"))
    if drafts <= 0:
        return None
    return 1.0 + accepted / drafts


def main(out: Path, title: str = ""):
    rows = {}
    for report in sorted(out.glob("*-c*.json")):
        m = re.match(r"(.+?)-(code|edit)-c(\d+)\.json$", report.name)
        if not m:
            continue
        server, workload, c = m.group(1), m.group(2), int(m.group(3))
        data = json.loads(report.read_text())
        tpot = (data.get("tpot_ms") or {}).get("mean")
        rows[(workload, c, server)] = {
            "out": data["output_token_throughput"],
            "decode": 1000.0 / tpot if tpot else None,
            "completed": data["completed"],
            "accept": acceptance_length(report),
        }
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=out).stdout.strip()
    except OSError:
        commit = "?"
    setup = title or ("target Qwen2.5-Coder-1.5B Q4_K_M, draft Qwen2.5-Coder-0.5B Q4_K_M, "
                      "greedy, 2 threads.")
    print(f"Speculative decoding, {out.name} (commit {commit}); {setup}\n")
    print("| workload | conc. | server | output tok/s | decode tok/s per request | speedup "
          "(decode, vs same engine plain) | mean acceptance length | requests |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (workload, c, server), r in sorted(rows.items()):
        engine = server.split("-")[0]
        plain = rows.get((workload, c, f"{engine}-plain"))
        speed = (f"{r['decode'] / plain['decode']:.2f}x"
                 if plain and plain["decode"] and r["decode"] else "-")
        decode = f"{r['decode']:.1f}" if r["decode"] else "-"
        accept = f"{r['accept']:.2f}" if r["accept"] else "-"
        print(f"| {workload} | {c} | {server} | {r['out']:.1f} | {decode} | {speed} | {accept} "
              f"| {r['completed']} |")


if __name__ == "__main__":
    # summarize_spec.py DIR [SETUP]: SETUP replaces the CPU run's description of the models.
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "")
