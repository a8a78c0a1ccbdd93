#!/usr/bin/env bash
# Throwaway device run: why eager PyTorch's product is faster at some large strict shapes.
set -u
cd "$(dirname "$0")/.."
D=.device-kokkos46
[ -d $D/bin ] || tar -xzf $D.tar.gz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$D/lib:${LD_LIBRARY_PATH:-}
o=$OUT/diag; mkdir -p $o
P=$D/bin/fused_linear_perf
SH="506x744x61606 6745x1323x16188 1x48381x8818 890x3667x36106 4096x4096x11008 1024x8192x8192"
date; nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
timeout 150 python3 diag/lt_diag.py 30 $SH > $o/torch_times.txt 2>&1; echo torch $?
for s in $SH; do IFS=x read m k n <<< $s; echo "== $s"
  timeout 60 $P --m $m --k $k --n $n --algorithm vendor_lt --reps 30 2>&1 | tail -4
  timeout 90 $P --m $m --k $k --n $n --algorithm auto --planning measure --reps 10 --json $o/measure_$s.json 2>&1 | tail -2
done > $o/ours_times.txt 2>&1; echo ours $?
for s in 506x744x61606 6745x1323x16188; do IFS=x read m k n <<< $s
  CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=$o/lt_torch_$s.log timeout 60 python3 diag/lt_diag.py 1 $s > /dev/null 2>&1
  CUBLASLT_LOG_LEVEL=5 CUBLASLT_LOG_FILE=$o/lt_ours_$s.log timeout 60 $P --m $m --k $k --n $n --algorithm vendor_lt --reps 1 --warmup 1 > /dev/null 2>&1
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum python3 diag/lt_diag.py 1 $s > $o/ncu_torch_$s.txt 2>&1
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum $P --m $m --k $k --n $n --algorithm vendor_lt --reps 2 --warmup 1 > $o/ncu_ours_$s.txt 2>&1
done; echo logs $?
ls -la $o; date
