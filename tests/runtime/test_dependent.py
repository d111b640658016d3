"""Decode kernels as programmatic dependent launches (``kernels/dependent.py``): which launches are, and that a
chain of them computes the same bits as plain launches (eagerly and in CUDA-graph replay)."""

import pytest
import torch
import triton

import mlx_native as mn
from helpers import randn
from mlx_native.kernels import dependent
from mlx_native.ops.ggml import formats
from mlx_native.kernels.increment import increment_
from mlx_native.kernels.launch import pdl_available, recording
from mlx_native.runtime import env, plans

# kernel -> its PDL mode on sm_90: 2 lets the next launch be scheduled at its start, 3 after its main loop
TRIGGERS = {"_norm_kernel": 2, "_rope_kernel": 2, "_elementwise_kernel": 2, "affine_idot_kernel": 2,
            "q6k_mv_kernel": 2, "q4k_idot_rows_kernel": 2, "q4_idot_kernel": 3, "q4_mv_kernel": 3,
            "q8_mv_kernel": 3, "mmv_kernel": 1, "affine_idot_rows_kernel": 3, "gemv_kernel": 3, "_argmax_kernel": 2,
            "_dequant_kernel": 2, "_increment_kernel": 2}  # _dequant_kernel: the embedding lookups'


def gguf_blocks(name: str, n: int, k: int, device) -> torch.Tensor:
    """Random GGUF blocks of an ``[n, k]`` weight with small fp16 scales (the one scale field of Q4_0 / Q8_0 at
    byte 0, of Q6_K at byte 208)."""
    t = formats.BY_NAME[name]
    gen = torch.Generator().manual_seed(7)
    raw = torch.randint(0, 256, (n * k // t.block_elems, t.block_bytes), dtype=torch.uint8, generator=gen)
    at = 208 if name == "Q6_K" else 0
    d = (torch.rand(raw.shape[0], generator=gen) * 0.01 + 1e-3).to(torch.float16)
    raw[:, at:at + 2] = d.view(torch.uint8).view(-1, 2)
    return raw.reshape(-1).to(device)


def _chain_ops(device, k=1024, n=256):
    """One call of each decode op with a dependent kernel, at sizes that take those kernels."""
    w = randn(n, k, dtype=torch.bfloat16, device=device, scale=0.02)
    wq, s, b = mn.quantize(w, 64, 4)
    nw = randn(k, dtype=torch.bfloat16, device=device)
    x1 = randn(1, k, dtype=torch.bfloat16, device=device)
    x3 = randn(3, k, dtype=torch.bfloat16, device=device)
    q6 = gguf_blocks("Q6_K", n, k, device)
    q8 = gguf_blocks("Q8_0", n, k, device)
    q40 = gguf_blocks("Q4_0", n, k, device)
    q8s = gguf_blocks("Q8_0", n, 544, device)  # K 544, an odd number of blocks: the word-level kernel
    pos = torch.arange(1, device=device) + 5
    kc, vc = (randn(1, 2, 300, 128, dtype=torch.bfloat16, device=device) for _ in range(2))
    lens = torch.tensor([300], dtype=torch.int32, device=device)
    counts = torch.zeros(2, 1, dtype=torch.int32, device=device)

    def chain():
        h = mn.rms_norm(x1, nw)
        g = mn.quantized_matmul(h, wq, s, b)
        r = mn.head_norm_rope(g.view(1, n // 128, 128), nw[:128], positions=pos)
        o = mn.flash_attn_decode(r.view(1, -1, 1, 128)[:, :8], kc, vc, lens).reshape(1, -1)  # [1, <= 8 heads]
        r = o.repeat(1, n // o.shape[1])
        a = mn.silu_mul(r, mn.ggml_matmul(h, q6, "Q6_K", (n, k)))
        c = mn.ggml_matmul(h, q8, "Q8_0", (n, k)) + mn.ggml_matmul(h, q40, "Q4_0", (n, k))
        c = c + mn.ggml_matmul(h[:, :544], q8s, "Q8_0", (n, 544))
        h3 = mn.rms_norm(x3, nw)
        tok = mn.argmax(c).clamp(0, n - 1)  # a decode step's tail: the token (clamped: recorded calls do not run),
        # the next step's embedding, the positions
        e = mn.ggml_embedding(tok, q8, "Q8_0", (n, k), dtype=torch.bfloat16) + mn.quantized_embedding(tok, wq, s, b)
        counts.zero_()
        increment_(counts)
        return a, c, mn.quantized_matmul(h3, wq, s, b), mn.ggml_matmul(h3[:2], q40, "Q4_0", (n, k)), e, counts

    return chain


def test_pdl_mode(device):
    """0 where the device (or the interpreter) has no PDL; else 2 with the trigger asked and allowed, 3 with a late
    one, 1 without."""
    dev = torch.device(device)
    assert dependent.pdl_mode(torch.device("cpu"), True) == 0
    if not pdl_available(dev):
        assert dependent.pdl_mode(dev, True) == dependent.pdl_mode(dev, False) == 0
        return
    assert dependent.pdl_mode(dev, True) == 2 and dependent.pdl_mode(dev, False) == 1
    assert dependent.pdl_mode(dev, "late") == 3
    env_trigger = dependent.EARLY_TRIGGER
    try:
        dependent.EARLY_TRIGGER = False
        assert dependent.pdl_mode(dev, True) == dependent.pdl_mode(dev, "late") == 1
    finally:
        dependent.EARLY_TRIGGER = env_trigger


def test_decode_launches_are_dependents(device):
    """Every launch of the chain whose kernel starts with ``enter`` is a PDL launch exactly where the device has
    PDL, with the kernel's trigger choice; on the CPU interpreter none is."""
    plans.clear_all()
    with recording(run=False) as seen:
        _chain_ops(device, *((4096, 4096) if device == "cuda" else ()))()  # the GPU's routes at real sizes
    names = {ln.kernel.__name__ for ln, _ in seen}
    assert set(TRIGGERS) - {"q4k_idot_rows_kernel", "affine_idot_rows_kernel"} <= names, names
    on = pdl_available(torch.device(device))
    for ln, _ in seen:
        name = ln.kernel.__name__
        if name in TRIGGERS:
            assert ln.pdl == on, name
            assert ln.constexprs["PDL"] == (TRIGGERS[name] if on else 0), name
    plans.clear_all()


def test_norm_weights_asked_of_l2_before_the_wait(device):
    """The norm and head-norm-rope launches of the chain prefetch their weight vectors before the wait
    (``W_LINES``: the 128-byte lines covering ``W_BYTES``, a power of two) exactly where the launch is a dependent
    one; ``prefetch_lines`` is 0 off CUDA."""
    assert dependent.prefetch_lines(8192, "cpu") == 0 and dependent.prefetch_lines(0, device) == 0
    k = 4096 if device == "cuda" else 1024
    on = pdl_available(torch.device(device))
    plans.clear_all()
    with recording(run=False) as seen:
        _chain_ops(device, *((k, k) if device == "cuda" else ()))()
    expected = {"_norm_kernel": k * 2, "_rope_kernel": 128 * 2}  # bf16 weights: the norm's [k], the heads' [128]
    got = [(ln.kernel.__name__, ln.constexprs["W_BYTES"], ln.constexprs["W_LINES"]) for ln, _ in seen
           if ln.kernel.__name__ in expected]
    assert {name for name, _, _ in got} == set(expected)
    for name, n_bytes, lines in got:
        assert n_bytes == expected[name], name
        assert lines == (triton.next_power_of_2(triton.cdiv(n_bytes, 128)) if on else 0), name
    plans.clear_all()


@pytest.mark.gpu
def test_gpu_dependent_chain_matches_plain_launches(monkeypatch):
    """The chain with its dependent launches gives the bits of the same chain launched in plain stream order
    (``MLX_NATIVE_PDL=0``), over repeated eager calls and CUDA-graph replays: no kernel reads its input before
    the launch that writes it has finished."""
    chain = _chain_ops("cuda", k=4096, n=4096)
    plans.clear_all()
    monkeypatch.setenv("MLX_NATIVE_PDL", "0")
    env.reload_settings()
    try:
        plain = chain()
    finally:
        monkeypatch.delenv("MLX_NATIVE_PDL")
        env.reload_settings()
        plans.clear_all()
    for _ in range(3):
        assert all(torch.equal(a, b) for a, b in zip(chain(), plain))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed = chain()
    for _ in range(3):
        for t in replayed:
            t.fill_(float("nan") if t.is_floating_point() else -1)
        graph.replay()
        assert all(torch.equal(a, b) for a, b in zip(replayed, plain))


def test_increment_adds_one_in_place(device):
    """``kernels.increment.increment_``: the decode step's position counters ``[2, B]`` advance by one in place
    (a programmatic dependent launch on sm_90); other tensors take ``Tensor.add_``."""
    counts = torch.tensor([[3, 7, 0], [4, 8, 1]], dtype=torch.int32, device=device)
    lens = counts[0]
    assert increment_(counts) is counts
    assert counts.cpu().tolist() == [[4, 8, 1], [5, 9, 2]] and lens.cpu().tolist() == [4, 8, 1]
    big = torch.arange(5000, dtype=torch.int32, device=device)
    increment_(big)
    assert torch.equal(big.cpu(), torch.arange(1, 5001, dtype=torch.int32))
    f = torch.zeros(3, device=device)
    increment_(f)
    assert f.cpu().tolist() == [1.0, 1.0, 1.0]
