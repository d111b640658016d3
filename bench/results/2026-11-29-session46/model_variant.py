"""bench/model.py with one decode-attention merge variant (session 46 A/B):

    python3 model_variant.py VARIANT [model.py args...]

VARIANT: ``default`` (merge_mode's choice), ``fused`` (the last split to arrive merges in the decode launch),
``reduce_trigger`` (the default with the PDL reduce letting the next launch be scheduled after its wait),
``fused_trigger`` (fused, and the decode launch lets the next launch be scheduled at its start)."""
import runpy
import sys

from mlx_native.ops.attention import decode

variant = sys.argv.pop(1)
if variant.startswith("fused"):
    decode.MERGE_OVERRIDE = "fused"
decode.REDUCE_TRIGGER = variant == "reduce_trigger"
decode.FUSED_TRIGGER = variant == "fused_trigger"
print(f"[variant] {variant}", flush=True)
sys.argv[0] = "bench/model.py"
runpy.run_path("bench/model.py", run_name="__main__")
