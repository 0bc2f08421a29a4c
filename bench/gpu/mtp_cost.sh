set -u
tar -xJf .gpu-pack/diag.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader
for t in mtp hybrid_speculation parity fixture_parity hybrid_engine hybrid_preemption batch_invariance gated_deltanet window_pool; do
  timeout 240 .gpu2/$t --nocapture > $OUT/$t.log 2>&1; echo "$t rc=$? $(grep 'test result' $OUT/$t.log)"
done
grep -hE "MTP drafts|parts at|accepted|panicked" $OUT/mtp.log $OUT/hybrid_speculation.log | head -20
S=bench/gpu/hybrid/qwen3.5-9b-style.json
r() { timeout 150 env "$@" 2>>$OUT/bench-err.log | grep -E "RESULT (preset|spec)" | head -2 | grep -oE "(decode|output)_tok_s=[0-9.]*|decode_step_forward_us=[0-9.]*|spec=.*" | tr '\n' ' '; echo; }
for bs in 1 16; do
  echo "9b-style bs=$bs plain: $(r .gpu2/offline_bench $S $bs 128 128)"
  for k in 1 3; do echo "9b-style bs=$bs mtp k=$k: $(r FERRITE_BENCH_SPEC=mtp FERRITE_BENCH_SPEC_FIXED=1 FERRITE_BENCH_SPEC_K=$k .gpu2/offline_bench $S $bs 128 128)"; done
done
S=bench/gpu/hybrid/qwen3.5-27b.json
for bs in 1 16; do
  echo "27b q4_k_m bs=$bs plain: $(r FERRITE_BENCH_QUANT=q4_k_m .gpu2/offline_bench $S $bs 128 128)"
  echo "27b q4_k_m bs=$bs mtp k=1: $(r FERRITE_BENCH_QUANT=q4_k_m FERRITE_BENCH_SPEC=mtp FERRITE_BENCH_SPEC_FIXED=1 FERRITE_BENCH_SPEC_K=1 .gpu2/offline_bench $S $bs 128 128)"
done
tail -5 $OUT/bench-err.log
