#!/usr/bin/env bash
# Call B (warm, after callA.sh): 64 streams on the 27B file, llama-server then ferrite serve,
# while the 35B-A3B file is written in the background (one python process; the servers and the
# client keep the other 15 cores).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s)
(bash bench/gpu/vs_llamacpp.sh files:35b >"$OUT/files35b.log" 2>&1; echo "files rc=$?" >>"$OUT/files35b.log") &
bg=$!
bash bench/gpu/vs_llamacpp.sh serve:27b 2>&1 | tail -60
echo "elapsed $(( $(date +%s) - t0 )) s"
wait $bg; tail -4 "$OUT/files35b.log"
echo "elapsed $(( $(date +%s) - t0 )) s"
