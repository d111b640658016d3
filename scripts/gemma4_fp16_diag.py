"""Diagnose Gemma 4 fp16 on CUDA: run the tiny random Gemma 4 (tests/models/tiny.py) in fp16 on the CPU and on
CUDA with the same backend, record every public mlx_native op's inputs and outputs in call order, and print the
first calls whose CUDA and CPU results disagree (inputs equal -> the op; inputs differ -> the torch code before it).
"""
import functools
import sys

import torch

sys.path[:0] = ["tests", "tests/models"]
import mlx_native as mn  # noqa: E402
from mlx_native.formats import load_checkpoint  # noqa: E402
from mlx_native.models import LoadOptions, build_model  # noqa: E402
from tiny import SEQ, make_hf_model, save_hf  # noqa: E402

LOG = []


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


def wrap(name, fn):
    @functools.wraps(fn)
    def inner(*a, **kw):
        out = fn(*a, **kw)
        ins = [t.detach().float().cpu().clone() for t in _tensors(a) + _tensors(list(kw.values()))]
        LOG.append((name, ins, [t.detach().float().cpu().clone() for t in _tensors(out)]))
        return out
    return inner


for n in dir(mn):
    f = getattr(mn, n)
    if callable(f) and not isinstance(f, type) and not n.startswith("_") and n not in ("load", "generate", "use_backend"):
        setattr(mn, n, wrap(n, f))


def run(device, backend, dtype, hf_path, ids):
    LOG.clear()
    ctx = mn.use_backend(backend) if backend else torch.no_grad()
    with ctx, torch.no_grad():
        m = build_model(load_checkpoint(hf_path), LoadOptions(torch.device(device), dtype, device == "cuda"))
        out = m.forward(ids.to(device), m.new_cache(2, 32), start=0, all_logits=True).double().cpu()
    return out, list(LOG)


def rel(a, b):
    if a.shape != b.shape:
        return float("inf")
    d = (a - b).abs()
    return (d.max() / b.abs().max().clamp_min(1e-6)).item()


torch.manual_seed(0)
hf = make_hf_model("gemma4")
path = save_hf(hf, "/tmp/g4diag")
ids = torch.randint(0, hf.config.vocab_size, (2, SEQ))
with torch.no_grad():
    oracle = hf.double()(ids).logits
    base16 = hf.to(device="cuda", dtype=torch.float16)(ids.to("cuda")).logits.double().cpu()
    hf.float().cpu()
err = lambda o: ((o - oracle).abs().max() / oracle.abs().max()).item()  # noqa: E731
print(f"transformers cuda fp16 error {err(base16):.4f}")
runs = {}
for dev, backend in (("cpu", "reference"), ("cuda", "reference"), ("cuda", None)):
    out, log = run(dev, backend, torch.float16, path, ids)
    runs[(dev, backend)] = log
    print(f"ours {dev} {backend or 'default'} fp16 error {err(out):.4f}, {len(log)} op calls")
cpu, gpu = runs[("cpu", "reference")], runs[("cuda", "reference")]
shown = 0
for i, ((n, ia, oa), (_, ib, ob)) in enumerate(zip(gpu, cpu)):
    din = max([rel(a, b) for a, b in zip(ia, ib)] or [0])
    dout = max([rel(a, b) for a, b in zip(oa, ob)] or [0])
    bad = any(not torch.isfinite(t).all() for t in oa)
    if dout > 2e-2 or bad:
        print(f"call {i:3d} {n:20s} in-diff {din:.3e} out-diff {dout:.3e} nonfinite {bad} "
              f"in shapes {[tuple(t.shape) for t in ia]} out max {[t.abs().max().item() for t in oa]}")
        shown += 1
        if shown >= 12:
            break
print("diag done")
