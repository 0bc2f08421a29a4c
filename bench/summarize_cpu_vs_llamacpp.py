#!/usr/bin/env python3
"""Markdown report of a bench/cpu_vs_llamacpp.sh run directory: medians over rounds, ratios
ferrite / llama.cpp from the same run, and the issue's targets next to them.

usage: summarize_cpu_vs_llamacpp.py RUN_DIR
"""

import glob
import json
import os
import re
import statistics
import sys

MODEL_NAMES = {
    "smollm": "SmolLM2-135M Q4_1",
    "qwen05": "Qwen2.5-Coder-0.5B Q4_K_M",
    "qwen15": "Qwen2.5-Coder-1.5B Q4_K_M",
    "moe": "random Qwen3-MoE 16x1024, 64 experts top 8, Q4_K_M",
}

# The targets of the issues each model belongs to: 19 (CPU round 2) for the dense models,
# 13 (mixture of experts) for the MoE file, which has a decode target only.
TARGETS = {"moe": {"pp": "—", "tg": "≥ 1.2× (issue 13)"}}
DEFAULT_TARGETS = {"pp": "≥ 1.5×", "tg": "≥ 1.2×"}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(x, digits=1):
    return "n/a" if x is None else f"{x:.{digits}f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def rounds(run_dir, pattern):
    """Files of one series over the rounds: `pattern` has a `*` where the round number goes."""
    return sorted(glob.glob(os.path.join(run_dir, pattern)))


def speed_rows(doc, tool):
    """The test rows of one llama-bench (`-o json`) or `ferrite bench-model --json` output."""
    if doc is None:
        return []
    return doc if tool == "llamacpp" else doc.get("results", [])


def is_kind(row, kind):
    """pp: a prompt and no generation; tg: batch-1 generation after at most one prompt token."""
    if kind == "pp":
        return row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0
    return row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) <= 1 and row.get("batch", 1) == 1


def speed_section(run_dir, meta):
    files = rounds(run_dir, "speed-*-r*.json")
    found = {re.match(r"speed-(.+)-(llamacpp|ferrite|ferrite-int8|ferrite-amx)-r\d+\.json", os.path.basename(f)).group(1) for f in files}
    models = [m for m in MODEL_NAMES if m in found] + sorted(found - set(MODEL_NAMES))
    if not models:
        return []
    # The opt-in variants that ran, each with its flag.
    variants = [
        (tool, flag)
        for tool, flag in (("ferrite-int8", "--int8-activations"), ("ferrite-amx", "--amx-bf16"))
        if rounds(run_dir, f"speed-*-{tool}-r*.json")
    ]
    out = [
        f"## Batch-1 speed: llama-bench vs `ferrite bench-model` ({meta.get('threads')} threads)",
        "",
        f"Median of every repetition of {meta.get('rounds')} A/B rounds ({meta.get('reps')} per round and tool): "
        "a repetition that collapsed while something else ran does not drag the result.",
        "",
        "| model | test | llama.cpp t/s | ferrite t/s | ferrite / llama.cpp | target | samples |"
        + "".join(f" ferrite {flag} t/s | / llama.cpp |" for _, flag in variants),
        "| --- | --- | ---: | ---: | ---: | --- | ---: |" + " ---: | ---: |" * len(variants),
    ]
    for m in models:
        for kind in ("pp", "tg"):
            target = TARGETS.get(m, DEFAULT_TARGETS)[kind]
            samples = {"llamacpp": [], "ferrite": [], "ferrite-int8": [], "ferrite-amx": []}
            test = kind
            for tool in samples:
                for f in rounds(run_dir, f"speed-{m}-{tool}-r*.json"):
                    for row in speed_rows(load(f), tool):
                        if is_kind(row, kind):
                            samples[tool] += row.get("samples_ts") or []
                            n = row.get("n_prompt") if kind == "pp" else row.get("n_gen")
                            test = f"{kind}{n}"
            lm, fm = median(samples["llamacpp"]), median(samples["ferrite"])
            row = (
                f"| {MODEL_NAMES.get(m, m)} | {test} | {fmt(lm)} | {fmt(fm)} | {fmt(ratio(fm, lm), 2)}× | "
                f"{target} | {len(samples['llamacpp'])} / {len(samples['ferrite'])} |"
            )
            for tool, _ in variants:
                vm = median(samples[tool])
                row += f" {fmt(vm)} | {fmt(ratio(vm, lm), 2)}× |"
            out.append(row)
    return out + [""]


def serve_metrics(doc):
    if not doc or doc.get("completed", 0) == 0:
        return None
    pick = lambda k, q: (doc.get(k) or {}).get(q)
    return {
        "out_tps": doc.get("output_token_throughput"),
        "ttft_p50": pick("ttft_ms", "p50"),
        "itl_p50": pick("itl_ms", "p50"),
        "itl_p99": pick("itl_ms", "p99"),
    }


def serving_section(run_dir, meta):
    files = rounds(run_dir, "serve-*-c*-r*.json")
    concurrencies = sorted({int(re.search(r"-c(\d+)-", os.path.basename(f)).group(1)) for f in files})
    if not concurrencies:
        return []
    out = [
        f"## Serving: `ferrite serve` vs `llama-server -np 16 --cont-batching` "
        f"({MODEL_NAMES.get(meta.get('serve_model'), meta.get('serve_model'))}, {meta.get('threads')} threads)",
        "",
        f"`ferrite bench --workload random --input-len {meta.get('serve_in')} --output-len {meta.get('serve_out')} "
        f"--max-concurrency C`; median over {meta.get('rounds')} rounds.",
        "",
        "| concurrency | server | output tok/s | TTFT p50 ms | ITL p50 ms | ITL p99 ms | ITL p99 / p50 |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    summary = {}
    for c in concurrencies:
        for server, label in (("llamacpp", "llama-server"), ("ferrite", "ferrite")):
            runs = [serve_metrics(load(f)) for f in rounds(run_dir, f"serve-{server}-c{c}-r*.json")]
            runs = [r for r in runs if r]
            med = {k: median([r[k] for r in runs]) for k in ("out_tps", "ttft_p50", "itl_p50", "itl_p99")}
            summary[(c, server)] = med
            out.append(
                f"| {c} | {label} | {fmt(med['out_tps'])} | {fmt(med['ttft_p50'])} | {fmt(med['itl_p50'])} | "
                f"{fmt(med['itl_p99'])} | {fmt(ratio(med['itl_p99'], med['itl_p50']), 2)} |"
            )
    top = max(concurrencies)
    f, l = summary.get((top, "ferrite"), {}), summary.get((top, "llamacpp"), {})
    out += [
        "",
        f"- aggregate output tok/s at concurrency {top}, ferrite / llama-server: "
        f"**{fmt(ratio(f.get('out_tps'), l.get('out_tps')), 2)}×** (target ≥ 2×)",
        f"- ferrite ITL p99 / p50 at concurrency {top}: "
        f"**{fmt(ratio(f.get('itl_p99'), f.get('itl_p50')), 2)}** (target ≤ 3)",
        "",
    ]
    return out


def prefix_section(run_dir, meta):
    out = []
    for server, label in (("ferrite", "ferrite"), ("llamacpp", "llama-server")):
        shared = [load(f) for f in rounds(run_dir, f"prefix-{server}-shared-r*.json")]
        cold = [load(f) for f in rounds(run_dir, f"prefix-{server}-cold-r*.json")]
        if not shared and not cold:
            continue
        s = median([((d or {}).get("ttft_ms") or {}).get("p50") for d in shared])
        c = median([((d or {}).get("ttft_ms") or {}).get("p50") for d in cold])
        hit = median([((d or {}).get("server_prefix_cache") or {}).get("hit_rate") for d in shared])
        cached = median([(d or {}).get("usage_cached_fraction") for d in shared])
        target = "≤ 0.1×" if server == "ferrite" else ""
        out.append(
            f"| {label} | {fmt(s)} | {fmt(c)} | {fmt(ratio(s, c), 3)}× | {target} | "
            f"{'n/a' if hit is None else f'{100 * hit:.1f}%'} | {'n/a' if cached is None else f'{100 * cached:.1f}%'} |"
        )
    if not out:
        return []
    return [
        f"## Prefix reuse: {meta.get('prefix_requests')} requests sharing a {meta.get('prefix_len')}-token prefix "
        f"vs {meta.get('prefix_requests')} cold prompts of the same length, one at a time",
        "",
        "| server | shared TTFT p50 ms | cold TTFT p50 ms | shared / cold | target | server hit rate | cached (usage) |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: |",
        *out,
        "",
    ]


def main():
    run_dir = sys.argv[1]
    meta = load(os.path.join(run_dir, "meta.json")) or {}
    lines = [
        f"# ferrite vs llama.cpp on the CPU ({meta.get('date', '?')})",
        "",
        f"- machine: {meta.get('cpu', '?')}, {meta.get('cores', '?')} cores, {meta.get('memory', '?')}",
        f"- ferrite commit: {meta.get('commit', '?')}; llama.cpp: {meta.get('llama_cpp', '?')} "
        f"(from the llama-cpp-python sdist, bench/llama_cpp/build.sh)",
        f"- threads: {meta.get('threads')}; run took {meta.get('elapsed_s', '?')} s; raw JSON in {os.path.basename(run_dir)}/",
        "",
    ]
    lines += speed_section(run_dir, meta)
    lines += serving_section(run_dir, meta)
    lines += prefix_section(run_dir, meta)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
