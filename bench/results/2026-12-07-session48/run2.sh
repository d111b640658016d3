#!/usr/bin/env bash
# Session 48 run 2: flash_attn_prefill(kv_lens=) and device-driven prefill chunks on CUDA (tests), then eager vs
# graph-replayed batch-1 prefill chunks (session 47's prefill_graph.py; run as a copy that differed only in its docstring). carry [".whl"] (gguf + mlx wheels).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench
timeout 200 python3 -m pytest tests/ops/test_attention.py tests/models/test_architectures.py tests/models/test_generate.py \
  -p no:cacheprovider -n 12 -q --tb=short -k "prefill or device_driven or chunked or graph or kv_lens" > $OUT/tests.log 2>&1
echo "tests rc $?"; grep -E "FAILED|ERROR|passed|failed" $OUT/tests.log | cut -c1-200 | tail -8
timeout 200 python3 bench/results/2026-11-29-session47/prefill_graph.py --lengths 128,512,2048 > $OUT/prefill_graph.log 2>&1
echo "graph rc $?"; grep -E "^\[graph\]|Error|error" $OUT/prefill_graph.log | cut -c1-300 | tail -12
python3 -c "import model as bm; bm.synthetic_smollm2_gguf('/tmp/smollm2-shaped.gguf')" && python3 -c "from mlx_native.cli import main; import sys; sys.exit(main(['bench', '--model', '/tmp/smollm2-shaped.gguf', '--device', 'cuda', '-p', '512', '-n', '0', '-r', '5', '--prefill-graph']))" > $OUT/cli_bench.log 2>&1
echo "cli rc $?"; tail -5 $OUT/cli_bench.log
