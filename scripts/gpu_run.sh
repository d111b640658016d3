#!/usr/bin/env bash
# The GPU harness: run on the device machine (through the device tool) from the repo root.
#
#   bash scripts/gpu_run.sh [tests] [sweep] [bench] [-- extra pytest args]
#
# With no step named it runs tests and bench. Writes under $OUT (default
# /tmp/mlx-native-out): env.txt, pytest.log, sweep.log, bench.log and
# bench_results.tar.gz (results.json, results.md, one PNG per family).
# TEST_PATHS (default: tests) selects test files; BENCH_ARGS is passed to bench/run_all.py.
# Wheels of peers/oracles missing on the device (Liger-Kernel, mlx, gguf...)
# travel in .whl/ (see docs/DEVELOPING.md) and are installed to /tmp/site.
set -uo pipefail
OUT=${OUT:-/tmp/mlx-native-out}
mkdir -p "$OUT"
steps=()
pytest_extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; pytest_extra=("$@"); break ;;
    *) steps+=("$1"); shift ;;
  esac
done
[ ${#steps[@]} -eq 0 ] && steps=(tests bench)

if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1

{ nvidia-smi; python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1
status=0
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      python3 -m pytest ${TEST_PATHS:-tests} -q -p no:cacheprovider -n 8 "${pytest_extra[@]}" 2>&1 | tee "$OUT/pytest.log" | tail -40
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    sweep)
      python3 bench/sweep.py 2>&1 | tee "$OUT/sweep.log" ;;
    bench)
      rm -rf /tmp/bench_results
      python3 bench/run_all.py --out /tmp/bench_results ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | grep -E '^\[bench\]|^\[overhead\]|Error|error' 
      tar czf "$OUT/bench_results.tar.gz" -C /tmp bench_results ;;
    *) echo "unknown step $step"; status=2 ;;
  esac
done
exit $status
