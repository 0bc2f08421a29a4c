#!/usr/bin/env bash
# On the H200 after bench/gpu/build.sh: tar -xJf .gpu-pack/gpu.tar.xz && bench/gpu/gemma3_ablation/run.sh
# (writes out-*.txt and err-*.txt beside itself). Each variant changes one gemma3 switch that a
# config can change; the CPU is the oracle for CUDA on the same dummy weights.
# gemma3 CPU vs CUDA ablation: greedy ids of the same dummy weights per config variant.
cd "$(dirname "$0")"
G=../../../.gpu
P="The quick brown fox jumps over the lazy dog and keeps running through the forest until night falls over the hills"
for c in base silu scale64 allfull window4096 localbase; do
  for d in cpu cuda; do
    timeout 60 $G/ferrite generate $c.json --device $d --load-format dummy --max-tokens 24 --token-ids --temperature 0 --prompt "$P" > out-$c-$d.txt 2> err-$c-$d.txt
  done
  a=$(grep -E "^[0-9 ]+$" out-$c-cpu.txt | head -1); b=$(grep -E "^[0-9 ]+$" out-$c-cuda.txt | head -1)
  echo "$c: cpu=[$a]"; echo "$c: cuda=[$b]"
done
tail -n 3 err-base-cuda.txt err-base-cpu.txt
