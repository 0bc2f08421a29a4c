# Sliding-window page pool (issue 37): GPU tests (window_pool new; parity, fixture_parity,
# hybrid_engine, batch_invariance for regressions), then offline_bench on gpt-oss-20b's shape
# with an 8 GiB KV budget, one pool vs the window pool: pages, most sequences running,
# throughput.
set -u
W=/root/w; mkdir -p $W
T0=$(date +%s)
tar -xJf .gpu-pack/gpu.tar.xz
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for t in window_pool hybrid_preemption parity hybrid_engine batch_invariance; do
  timeout 150 .gpu/tests/$t --test-threads=1 --nocapture > $OUT/test-$t.log 2>&1; echo "$t rc=$?"
  grep -E "test result|panicked|window pool|FAILED" $OUT/test-$t.log | head -8
done
timeout 200 .gpu/tests/fixture_parity --test-threads=1 > $OUT/test-fixture_parity.log 2>&1
echo "fixture_parity rc=$?"; grep -E "test result|panicked" $OUT/test-fixture_parity.log | head -5
echo "tests $(( $(date +%s) - T0 )) s"
for pool in 0 1; do
  echo "== window pool $pool: 48 x (8192, 64), 8 GiB"
  FERRITE_BENCH_KV_GIB=8 FERRITE_BENCH_WINDOW_KV_POOL=$pool timeout 150 .gpu/offline_bench \
    bench/gpu/gpt_oss/gpt-oss-20b.json 48 8192 64 2>>$OUT/ob-$pool.err | grep RESULT | tee -a $OUT/ob-window.txt
done
echo "total $(( $(date +%s) - T0 )) s"
