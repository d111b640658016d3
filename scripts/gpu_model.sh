#!/usr/bin/env bash
# SmolLM2 on the GPU with the real GGUF: correctness against transformers + the model benchmarks.
#
#   MLX_NATIVE_SMOLLM2_GGUF=/path/SmolLM2-135M-Instruct.Q4_1.gguf bash scripts/gpu_model.sh
#
# Without MLX_NATIVE_SMOLLM2_GGUF the file is reassembled from parts made with `split -b 33000000`
# (the 98 MB file does not fit one device call's 64 MiB, tracked tree included: ~16 MB in session 27): every file
# named part_* under .model_a/, .model_b/ or /tmp/smollm2_parts/ is concatenated in name order and checked
# against the sha256 below. A later call does not keep the ignored paths carried by an earlier one, so each call
# but the last carries one part folder and copies it out of the tree (mkdir -p /tmp/smollm2_parts && cp
# .model_a/part_* /tmp/smollm2_parts/), the next one following within the machine's idle time (30 s); the last
# carries its part (copied the same way first) and a folder .whl_gguf with the gguf wheel (the only wheel these
# tests need; liger-kernel for a bench) and runs this script. Session 27 used three parts (.model_a, .model_b,
# .model_c), ~33 MB each.
#
# Writes under $OUT (default /tmp/mlx-native-out): env.txt, smollm2_pytest.log,
# generate.log, cli_bench.md, model_bench.log and model_bench/ (model_results.json/.md).
set -uo pipefail
OUT=${OUT:-/tmp/mlx-native-out}
mkdir -p "$OUT"
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

# one file per wheel name: a .whl/ left on the machine by an earlier call may hold the same wheel again, and pip
# refuses two copies of one version (session 21, run 8)
wheels=$(ls .whl*/*.whl 2>/dev/null | awk -F/ '!seen[$NF]++')
if [ -n "$wheels" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site $wheels \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src:$PWD/tests${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

if [ -z "${MLX_NATIVE_SMOLLM2_GGUF:-}" ]; then
  parts=$(for f in .model_a/part_* .model_b/part_* /tmp/smollm2_parts/part_*; do
             [ -f "$f" ] && echo "$(basename "$f") $f"; done | sort -u -k1,1 | cut -d' ' -f2)
  if [ -z "$parts" ]; then
    echo "no MLX_NATIVE_SMOLLM2_GGUF and no part_* files under .model_a, .model_b or /tmp/smollm2_parts" >&2
    exit 3
  fi
  cat $parts > /tmp/smollm2.gguf
  export MLX_NATIVE_SMOLLM2_GGUF=/tmp/smollm2.gguf
fi
got=$(sha256sum "$MLX_NATIVE_SMOLLM2_GGUF" | cut -d' ' -f1)
if [ "$got" != "$SHA" ]; then
  echo "sha256 of $MLX_NATIVE_SMOLLM2_GGUF is $got, expected $SHA (incomplete parts?)" >&2
  exit 3
fi
GGUF=$MLX_NATIVE_SMOLLM2_GGUF
{ nvidia-smi; python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__)"; } > "$OUT/env.txt" 2>&1

status=0
# the SmolLM2 GPU tests (teacher-forced agreement, graph vs eager decode) and the sampling ops on CUDA
timeout ${TEST_TIMEOUT:-240} python3 -m pytest tests/models/test_smollm2.py tests/ops/test_sampling.py \
  -k "not test_cpu_" -q -s -p no:cacheprovider -rA 2>&1 | tee "$OUT/smollm2_pytest.log" | grep -E "SmolLM2|passed|failed|FAILED|ERROR" | tail -25
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
timeout 120 python3 -m mlx_native.cli generate --model "$GGUF" -p "Explain in two sentences why the sky is blue." \
  -m 64 2>&1 | tee "$OUT/generate.log"
timeout 120 python3 -m mlx_native.cli bench --model "$GGUF" -p 512 -n 128 -r 5 2>&1 | tee "$OUT/cli_bench.md"
timeout ${BENCH_TIMEOUT:-300} python3 bench/model.py --out "$OUT/model_bench" --gguf "$GGUF" ${MODEL_BENCH_ARGS:---profile} 2>&1 \
  | tee "$OUT/model_bench.log" | grep -E '^\[model\]|^\|' 
exit $status
