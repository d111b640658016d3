#!/usr/bin/env bash
# Session 47 run 2: main (.old) against weights-l2-prefetch (.mid) only. Qwen3-30B-A3B-shaped MLX d0 rows
# alternated (old, mid, old, mid) to see the noise, the Llama-3-8B / SmolLM2-shaped rows, eager profiles.
# carry [".whl", ".old", ".mid"].
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1
for i in 1 2; do for tree in old mid; do
  timeout 45 env PYTHONPATH=/tmp/site:$PWD/.$tree/src:$PWD/bench python3 bench/model.py --out $OUT/qwen_${tree}_$i \
    --only llama8b --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64 --reps 3 > $OUT/qwen_${tree}_$i.log 2>&1
  echo "qwen $tree $i rc $?"; grep "tok/s" $OUT/qwen_${tree}_$i.log | grep "^\[model\]" | cut -c1-150
done; done
for tree in old mid; do
  P="env PYTHONPATH=/tmp/site:$PWD/.$tree/src:$PWD/bench python3 bench/model.py"
  timeout 50 $P --out $OUT/llama_$tree --only llama8b --kinds-8b mlx-affine-4bit-g64,gguf-Q4_K --reps 3 \
    > $OUT/llama_$tree.log 2>&1
  echo "llama $tree rc $?"; grep "tok/s" $OUT/llama_$tree.log | grep "^\[model\]" | cut -c1-150
  timeout 60 $P --out $OUT/smollm2_$tree --only smollm2 --skip-hf --skip-compiled --reps 3 > $OUT/smollm2_$tree.log 2>&1
  echo "smollm2 $tree rc $?"; grep "tok/s" $OUT/smollm2_$tree.log | grep "^\[model\]" | cut -c1-150
  timeout 50 $P --out $OUT/prof_$tree --only llama8b --arch qwen3-30b-a3b --layers-8b 12 --kinds-8b mlx-affine-4bit-g64 \
    --reps 1 --profile > $OUT/prof_$tree.log 2>&1
  echo "profile $tree rc $?"; grep "^\[model\]" $OUT/prof_$tree.log | grep -E "kernels|norm|rope" | cut -c1-120
done
