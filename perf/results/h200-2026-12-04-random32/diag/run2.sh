#!/usr/bin/env bash
# Throwaway device run: the packed pass over Y at the eager-gap shapes (kernel time under ncu).
set -u
cd "$(dirname "$0")/.."
D=.device-kokkos46
[ -d $D/bin ] || tar -xzf $D.tar.gz
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$PWD/$D/lib:${LD_LIBRARY_PATH:-}
o=$OUT/diag; mkdir -p $o
P=$D/bin/fused_linear_perf
for s in 506x744x61606 6745x1323x16188; do IFS=x read m k n <<< $s
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum $P --m $m --k $k --n $n --algorithm vendor_lt --reps 2 --warmup 1 > $o/ncu_ours_packed_$s.txt 2>&1
  timeout 60 $P --m $m --k $k --n $n --algorithm vendor_lt --reps 30 > $o/ours_packed_$s.txt 2>&1
done; echo ncu $?
