"""``ggml_to_affine``: GGUF Q4_0 / Q4_1 blocks repacked into the MLX affine 4-bit layout (group 32).

Oracles: ``gguf.quants.dequantize`` (llama.cpp's Python package) and ``ggml_dequantize`` of the
same bytes must equal ``dequantize`` of the repacked tensors value for value (torch.equal; a
Q4_0 code 8 with a negative scale is -0.0 in GGML and +0.0 in the affine form); MLX's own
``mx.dequantize`` reads the repacked layout too. Random codes with sane and extreme fp16
scales, odd shapes, the float32 fallback of Q4_0 scales whose ``-8 d`` overflows fp16, and bad input.
"""

import mlx.core as mx
import numpy as np
import pytest
import torch

import mlx_native as mn
from test_ggml import crafted_blocks, gguf_values, raw_tensor, rng_for, valid_blocks

TYPES = ("Q4_0", "Q4_1")
BLOCK_BYTES = {"Q4_0": 18, "Q4_1": 20}


def affine_values(w_q, scales, biases) -> torch.Tensor:
    """The repacked tensor dequantized in fp32 (fp16 -> fp32 scales is exact)."""
    return mn.dequantize(w_q, scales.float(), biases.float(), group_size=32, bits=4)


def assert_same_values(ours: torch.Tensor, theirs: torch.Tensor, what: str, inf_as_nan: bool = False) -> None:
    """NaN where the oracle has NaN, equal values (so +0.0 == -0.0) everywhere else.

    ``inf_as_nan``: the oracle's infinities must be NaN in ours (Q4_0 blocks with an infinite
    scale: ``inf * q - inf``)."""
    ours, theirs = ours.cpu(), theirs.cpu()
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype == torch.float32, what
    if inf_as_nan:
        theirs = torch.where(theirs.isinf(), torch.nan, theirs)
    nan_o, nan_t = ours.isnan(), theirs.isnan()
    assert torch.equal(nan_o, nan_t), f"{what}: NaN positions differ"
    bad = (ours != theirs) & ~nan_t
    assert not bad.any(), f"{what}: {int(bad.sum())} values differ, first {ours[bad][0]} vs {theirs[bad][0]}"


def check(raw: np.ndarray, name: str, n: int, k: int, device: str, scale_dtype=torch.float16, flat=False,
          inf_as_nan=False):
    """Repack ``raw`` and compare; on the CPU, tensors of 4096 values or more are dequantized by
    the PyTorch reference instead of the Triton interpreter (slow; the kernels see the small ones)."""
    t = raw_tensor(raw, device)
    if not flat:
        t = t.reshape(n, -1)
    w_q, scales, biases = mn.ggml_to_affine(t, name, (n, k))
    assert w_q.dtype == torch.uint32 and w_q.shape == (n, k // 8) and w_q.device == t.device
    assert scales.dtype == biases.dtype == scale_dtype
    assert scales.shape == biases.shape == (n, k // 32)
    with np.errstate(invalid="ignore", over="ignore"):
        oracle = torch.from_numpy(gguf_values(raw, name, (n, k)))
    with mn.use_backend("reference" if device == "cpu" and n * k >= 4096 else "auto"):
        ours = affine_values(w_q, scales, biases)
        ggml = mn.ggml_dequantize(t, name, (n, k), dtype=torch.float32)
    assert_same_values(ours, oracle, f"{name} {n}x{k} vs gguf", inf_as_nan)
    assert_same_values(ours, ggml, f"{name} {n}x{k} vs ggml", inf_as_nan)
    return w_q, scales, biases, oracle


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("n", [1, 3, 17])
@pytest.mark.parametrize("k", [32, 64, 96, 4096])
def test_repack_equals_ggml_and_gguf(device, name, n, k, request):
    rng = rng_for(request)
    check(crafted_blocks(name, n * k // 32, rng), name, n, k, device)
    check(valid_blocks(name, n, k, rng), name, n, k, device, flat=True)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in numpy
@pytest.mark.parametrize("name", TYPES)
def test_repack_extreme_scales(device, name, request):
    """fp16 scale fields of +-65504, subnormals, +-0, +-inf and NaN (finite |d| <= 8188 for Q4_0
    so that its biases stay fp16; larger ones: next test). A Q4_0 block with an infinite d
    (+-inf and NaN values in GGML) is all NaN: ``inf * q - 8 * inf``; Q4_1 keeps its infinities."""
    rng = rng_for(request)
    n, k = 17, 96
    raw = crafted_blocks(name, n * k // 32, rng, extreme=True).reshape(-1, BLOCK_BYTES[name])
    if name == "Q4_0":
        d = raw[:, 0:2].copy().view(np.float16)
        raw[:, 0:2] = np.where(np.isfinite(d) & (np.abs(d) > 8188), np.float16(-8188), d).view(np.uint8)
        raw[:3, 0:2] = np.array([[8188.0], [6e-8], [-6e-8]], dtype=np.float16).view(np.uint8)
    check(raw.reshape(-1), name, n, k, device, inf_as_nan=name == "Q4_0")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf * 0 in numpy
def test_q4_0_scales_that_overflow_fp16_use_fp32(device, request):
    """|d| > 8188 makes -8d overflow fp16: the whole tensor gets float32 scales and biases."""
    rng = rng_for(request)
    n, k = 3, 64
    raw = crafted_blocks("Q4_0", n * k // 32, rng).reshape(-1, 18)
    raw[1, 0:2] = np.array([8192.0], dtype=np.float16).view(np.uint8)
    raw[4, 0:2] = np.array([-65504.0], dtype=np.float16).view(np.uint8)
    raw[4, 2] &= 0xF0  # value 0 of block 4 has code 0: -65504 * (0 - 8)
    _, scales, biases, oracle = check(raw.reshape(-1), "Q4_0", n, k, device, scale_dtype=torch.float32)
    assert biases.flatten()[4].item() == 8 * 65504.0 and oracle.abs().max().item() == 8 * 65504.0
    # inf and the largest safe d keep fp16
    raw[1, 0:2] = np.array([np.inf], dtype=np.float16).view(np.uint8)
    raw[4, 0:2] = np.array([-8188.0], dtype=np.float16).view(np.uint8)
    _, _, biases, _ = check(raw.reshape(-1), "Q4_0", n, k, device, inf_as_nan=True)
    assert biases.flatten()[4].item() == 65504.0 and biases.flatten()[1].item() == -np.inf


def test_layout_nibble_p_of_word_j_is_column_8j_plus_p(device):
    """Codes 0..31 of one block (value v = (v + 5) % 16) land in word v // 8, nibble v % 8."""
    codes = (np.arange(32) + 5) % 16
    block = np.zeros(20, dtype=np.uint8)
    block[0:4] = np.array([1.0, 0.0], dtype=np.float16).view(np.uint8)
    block[4:20] = codes[:16] | (codes[16:] << 4)
    w_q, _, _ = mn.ggml_to_affine(raw_tensor(block, device), "Q4_1", (1, 32))
    words = w_q.view(torch.int32).cpu().numpy().view(np.uint32)[0]
    got = [(int(words[v // 8]) >> (4 * (v % 8))) & 0xF for v in range(32)]
    assert got == codes.tolist()


@pytest.mark.parametrize("name", TYPES)
def test_mlx_reads_the_repacked_layout(device, name, request):
    rng = rng_for(request)
    n, k = 5, 128
    raw = valid_blocks(name, n, k, rng)
    w_q, scales, biases = mn.ggml_to_affine(raw_tensor(raw, device), name, (n, k))
    mx_w = mx.array(w_q.view(torch.int32).cpu().numpy().view(np.uint32))
    theirs = mx.dequantize(mx_w, mx.array(scales.float().cpu().numpy()), mx.array(biases.float().cpu().numpy()),
                           group_size=32, bits=4)
    assert_same_values(torch.from_numpy(np.array(theirs)), torch.from_numpy(gguf_values(raw, name, (n, k))),
                       f"mx.dequantize {name}")


def test_int8_raw_and_leading_dims(device, request):
    rng = rng_for(request)
    raw = valid_blocks("Q4_1", 6, 64, rng)
    t = raw_tensor(raw, device).view(torch.int8)
    w_q, scales, biases = mn.ggml_to_affine(t, "q4_1", (2, 3, 64))
    assert w_q.shape == (2, 3, 8) and scales.shape == (2, 3, 2)
    assert_same_values(affine_values(w_q, scales, biases), torch.from_numpy(gguf_values(raw, "Q4_1", (2, 3, 64))),
                       "leading dims")


def test_empty(device):
    w_q, scales, biases = mn.ggml_to_affine(torch.empty(0, dtype=torch.uint8, device=device), "Q4_0", (0, 64))
    assert w_q.shape == (0, 8) and scales.shape == biases.shape == (0, 2)


@pytest.mark.parametrize("name", ["Q8_0", "Q4_K", "F16", 12])
def test_unsupported_types_name_the_supported_ones(name):
    raw = torch.zeros(1024, dtype=torch.uint8)
    with pytest.raises(mn.UnsupportedError, match=r"ggml_to_affine: ggml_type .* not supported; supported: Q4_0, "
                                                  r"Q4_1$"):
        mn.ggml_to_affine(raw, name, (1, 256))


def test_bad_sizes_raise_as_ggml_dequantize():
    for raw, shape in ((torch.zeros(36, dtype=torch.uint8), (1, 96)), (torch.zeros(35, dtype=torch.uint8), (1, 64))):
        with pytest.raises(mn.FormatError) as ours:
            mn.ggml_to_affine(raw, "Q4_0", shape)
        with pytest.raises(mn.FormatError) as theirs:
            mn.ggml_dequantize(raw, "Q4_0", shape)
        assert str(ours.value).replace("ggml_to_affine", "ggml_dequantize") == str(theirs.value)
    with pytest.raises(mn.InvalidArgumentError, match="not a multiple of 32"):
        mn.ggml_to_affine(torch.zeros(18, dtype=torch.uint8), "Q4_0", (1, 48))
    with pytest.raises(mn.InvalidArgumentError, match="contiguous"):
        mn.ggml_to_affine(torch.zeros(2, 36, dtype=torch.uint8)[:, :18], "Q4_0", (2, 32))
    with pytest.raises(mn.UnsupportedDTypeError):
        mn.ggml_to_affine(torch.zeros(18, dtype=torch.float32), "Q4_0", (1, 32))
