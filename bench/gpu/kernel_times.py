"""Per-kernel GPU time of one forward pass, from Nsight Compute's raw CSV.

  kernel_times.py NCU.csv [--forward K]

ncu must have run with `--metrics gpu__time_duration.sum --csv --page raw` over a program whose
forward passes each begin with the token embedding's kernel (`embedding_gather`, or `qembed_*` for a
quantized embedding: ferrite's CUDA backend). The launches
are cut into forward passes there; the summary is of pass K (default: the last), by kernel name:
launches, total and share of the pass, then the first layer's launches in order. ncu runs one
kernel at a time, so the sum is the pass without launch overlap.
"""
import csv
import sys
from collections import defaultdict

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}


def read_launches(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    # The program's own output and ncu's "==PROF==" lines come before the table.
    first = next(i for i, r in enumerate(rows) if "gpu__time_duration.sum" in r)
    rows = [r for r in rows[first:] if len(r) > 1]
    header = rows[0]
    name_col = next(i for i, h in enumerate(header) if h in ("Kernel Name", "Function Name"))
    time_col = header.index("gpu__time_duration.sum")
    grid_col = header.index("Grid Size") if "Grid Size" in header else None
    scale = 1.0
    body = rows[1:]
    if body and body[0][time_col] in UNITS:  # the raw page's second header row: units
        scale = UNITS[body[0][time_col]]
        body = body[1:]
    launches = []
    for r in body:
        try:
            us = float(r[time_col].replace(",", "")) * scale
        except ValueError:
            continue
        launches.append((r[name_col], r[grid_col] if grid_col is not None else "", us))
    return launches


def short(name, width=90):
    name = name.split("(")[0] if not name.startswith("void ") else name[5:].split("(")[0]
    return name if len(name) <= width else name[: width - 3] + "..."


def main():
    path = sys.argv[1]
    which = int(sys.argv[sys.argv.index("--forward") + 1]) if "--forward" in sys.argv else -1
    launches = read_launches(path)
    starts = [i for i, (n, _, _) in enumerate(launches)
              if n.startswith("embedding_gather") or n.startswith("qembed_")]
    if not starts:
        sys.exit("no embedding launch (embedding_gather, qembed_*): not a ferrite CUDA forward")
    passes = [launches[a:b] for a, b in zip(starts, starts[1:] + [len(launches)])]
    # A pass's embedding grid grows with its tokens: it tells a decode step of many sequences
    # from a warm-up or prompt pass the launch window may have caught instead (on 2026-12-07
    # a "64-sequence decode" profile turned out to be the 9-token warm-up pass).
    print(f"{len(launches)} launches, {len(passes)} forward passes; totals (ms) [embedding grid]:",
          " ".join(f"{sum(t for _, _, t in p) / 1e3:.2f} [{p[0][1]}]" for p in passes))
    p = passes[which]
    total = sum(t for _, _, t in p)
    by_name = defaultdict(lambda: [0, 0.0])
    for name, _, t in p:
        by_name[short(name)][0] += 1
        by_name[short(name)][1] += t
    print(f"\nforward pass {which}: {len(p)} launches, {total / 1e3:.3f} ms (sum of kernel times)")
    print(f"{'kernel':92} {'n':>5} {'ms':>8} {'share':>6}")
    for name, (count, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:92} {count:5d} {t / 1e3:8.3f} {100 * t / total:5.1f}%")
    # The second layer's launches in order (the first has no residual add): between the 2nd
    # and 3rd add_rmsnorm pairs.
    norms = [i for i, (n, _, _) in enumerate(p) if n.startswith("add_rmsnorm")]
    if len(norms) >= 5:
        print("\none layer, in order (us, grid):")
        for name, grid, t in p[norms[2]:norms[4]]:
            print(f"  {t:9.1f}  {grid:>16}  {short(name, 110)}")


if __name__ == "__main__":
    main()
