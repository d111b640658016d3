#!/usr/bin/env bash
# session 25 run 2: warp stall reasons (ncu) of the 2-16-row tensor-core kernel and the one-row integer-dot kernel
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
P=scripts/ncu_decode_matmul.py
MET="--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed_op_shared.*sum,smsp__inst_executed_op_global.*sum,l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,lts__t_bytes.sum,dram__bytes_read.sum,smsp__inst_executed_pipe_tensor.*sum,sm__cycles_elapsed.avg"
for spec in "affine 16 mmv_kernel" "affine 1 affine_idot"; do
  set -- $spec
  timeout 120 ncu --clock-control none --kernel-name regex:$3 --launch-skip 3 --launch-count 1 $MET \
    python3 $P --format $1 --m $2 --k 4096 --n 14336 > $OUT/stall_$1_m$2.txt 2>&1
  echo "== $spec rc=$?"; grep -E "stalled|inst_executed|bytes|cycles" $OUT/stall_$1_m$2.txt | awk '$NF+0 > 0.05' | sed 's/smsp__average_warps_issue_stalled_//'
done
