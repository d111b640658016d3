"""argmax / sample: against torch and the reference, keep-set rules, the sampled
distribution, determinism per seed, graph safety (seed as a tensor), bad input."""

import math

import pytest
import torch

import mlx_native as mn
from mlx_native.ops.sampling import ref

VOCABS = [1, 7, 1000, 4097]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("vocab", VOCABS)
def test_argmax_matches_torch(device, dtype, vocab):
    x = (torch.randn(5, vocab) * 4).to(dtype=dtype, device=device)
    out = mn.argmax(x)
    assert out.dtype == torch.int64 and out.shape == (5,)
    assert torch.equal(out.cpu(), torch.argmax(x.float().cpu(), -1))


def test_argmax_ties_nan_and_shapes(device):
    x = torch.zeros(2, 3, 300, device=device)
    x[0, 1, 17] = x[0, 1, 250] = 5.0  # tie: the lowest index wins
    x[1, 2, 5] = float("nan")  # NaN is ignored
    x[1, 2, 9] = 1.0
    out = mn.argmax(x)
    assert out.shape == (2, 3)
    assert out[0, 1].item() == 17 and out[1, 2].item() == 9 and out[0, 0].item() == 0
    strided = torch.randn(4, 2, 500, device=device)[:, 1]  # strided rows
    assert torch.equal(mn.argmax(strided).cpu(), strided.cpu().argmax(-1))


def test_argmax_split_rows_tie_across_parts(device):
    """A row split over several programs (the interpreter: 3 parts of two 2048-column blocks; CUDA: 5 parts
    of one block): the maximum in a later part, ties across parts (the lowest index wins), NaN, and repeated
    calls (the arrival counters rearm)."""
    x = torch.randn(3, 9000, device=device)
    x[0, 8999] = 50.0  # maximum in the last part
    x[1, 100] = x[1, 4500] = x[1, 8500] = 60.0  # tie across parts
    x[2, :] = float("nan")
    x[2, 6000] = -1.0
    for _ in range(3):
        out = mn.argmax(x)
        assert out.tolist() == [8999, 100, 6000]
    y = torch.randn(2, 9000, device=device)
    assert torch.equal(mn.argmax(y).cpu(), y.cpu().argmax(-1))


def test_argmax_one_block_parts_edges(device):
    """5000 columns: 3 parts of one 2048-column block (interpreter and CUDA), the last one short. Negative
    maxima, a tie at the boundary of two parts, -0.0 tying +0.0 across parts, NaN in the last part (its last
    column too), all -inf and all NaN rows (index 0)."""
    x = torch.randn(7, 5000, device=device) - 100.0
    x[0, 3000] = -1.0  # negative maximum in the middle part
    x[1, 2047] = x[1, 2048] = -0.5  # tie: last column of part 0, first of part 1
    x[2, 4500] = x[2, 4999] = x[2, 10] = float("nan")
    x[2, 4998] = 7.0
    x[3, :] = float("-inf")
    x[4, :] = float("nan")
    x[5, 100] = -0.0
    x[5, 4100] = 0.0  # equal to -0.0: the lower index wins
    x[6, :] = float("-inf")
    x[6, 4999] = -1e30  # the only finite value: the last column of the short last part
    want = [3000, 2047, 4998, 0, 0, 100, 4999]
    for _ in range(2):
        assert mn.argmax(x).tolist() == want
    assert ref.argmax(x.cpu()).tolist() == want
    assert mn.argmax(x.to(torch.bfloat16)).tolist() == want


def test_argmax_into_out(device):
    """``out=`` writes the indices in place (split rows too) and returns ``out``; a wrong out is a typed
    error before any launch."""
    x = torch.randn(2, 9000, device=device)
    out = torch.full((2,), -1, dtype=torch.int64, device=device)
    assert mn.argmax(x, out=out) is out
    assert torch.equal(out.cpu(), x.cpu().argmax(-1))
    tok = torch.zeros(1, 1, dtype=torch.int64, device=device)
    mn.argmax(x[:1], out=tok.view(1))
    assert tok.item() == x[0].argmax().item()
    with pytest.raises(mn.UnsupportedDTypeError, match="argmax: out has dtype int32"):
        mn.argmax(x, out=out.int())
    with pytest.raises(mn.InvalidArgumentError, match=r"argmax: out must be a contiguous int64 tensor of \(2,\)"):
        mn.argmax(x, out=torch.zeros(3, dtype=torch.int64, device=device))


CONFIGS = [
    dict(temperature=1.0),
    dict(temperature=0.7, top_k=5),
    dict(temperature=1.3, top_p=0.6),
    dict(temperature=1.0, min_p=0.2),
    dict(temperature=0.8, top_k=40, top_p=0.9, min_p=0.02),
]


def _rows(device, gpu_rows, cpu_rows):
    """Row counts: the interpreter runs each program in Python, so CPU runs use fewer."""
    return gpu_rows if device == "cuda" else cpu_rows


@pytest.mark.parametrize("kw", CONFIGS, ids=[str(c) for c in CONFIGS])
@pytest.mark.parametrize("vocab", [7, 1000, pytest.param(4097, marks=pytest.mark.gpu)])
def test_sample_matches_reference(device, kw, vocab):
    """Kernel and reference pick the same tokens for the same seeds (ulp-level
    differences of exp/log may flip a near-tie: allow 1 row)."""
    rows = _rows(device, 64, 12)
    x = torch.randn(rows, vocab) * 3
    seeds = torch.arange(rows, dtype=torch.int64) * 7919 + 11
    got = mn.sample(x.to(device), seed=seeds.to(device), **kw).cpu()
    want = ref.sample(x, seeds, kw["temperature"], kw.get("top_k", 0), kw.get("top_p", 1.0), kw.get("min_p", 0.0))
    assert (got != want).sum().item() <= 1


def test_sample_is_deterministic_per_seed_and_varies_with_it(device):
    x = torch.randn(1, 3000, device=device)
    a = [mn.sample(x, temperature=1.0, seed=torch.tensor([s], device=device)).item() for s in range(16)]
    b = [mn.sample(x, temperature=1.0, seed=torch.tensor([s], device=device)).item() for s in range(16)]
    assert a == b
    assert len(set(a)) > 8


@pytest.mark.parametrize("kw", [dict(top_k=3), dict(top_p=0.5), dict(min_p=0.3)])
def test_sample_never_leaves_the_keep_set(device, kw):
    rows = _rows(device, 256, 24)
    x = torch.randn(rows, 300) * 2
    seeds = torch.arange(rows)
    keep = ref.keep_mask(x, 1.0, kw.get("top_k", 0), kw.get("top_p", 1.0), kw.get("min_p", 0.0))
    got = mn.sample(x.to(device), temperature=1.0, seed=seeds.to(device), **kw).cpu()
    assert keep.gather(1, got[:, None]).all()
    if "top_k" in kw:
        assert (keep.sum(1) == 3).all()


def test_keep_set_definitions():
    x = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0]])
    p = torch.softmax(x, -1)[0]
    # top-p: the smallest prefix of the sorted tokens whose mass reaches top_p
    for top_p in (0.5, float(p[0]) + 1e-4, float(p[:2].sum()) + 1e-4, 0.999):
        n = int((torch.cumsum(p, 0) < top_p).sum()) + 1
        assert ref.keep_mask(x, 1.0, 0, top_p, 0.0)[0].tolist() == [i < n for i in range(5)]
    # top-p renormalizes over the top-k survivors
    pk = torch.softmax(x[0, :2], -1)
    assert ref.keep_mask(x, 1.0, 2, float(pk[0]) - 1e-3, 0.0)[0].tolist() == [True, False, False, False, False]
    # min-p: probability >= min_p * max probability
    assert ref.keep_mask(x, 1.0, 0, 1.0, math.exp(-1.5))[0].tolist() == [True, True, False, False, False]


def test_sampled_distribution(device):
    """Draws (one per row and seed) against the renormalized distribution (chi-square, p = 0.001).
    The GPU run also filters with top-k (the interpreter is too slow for its bisection at this count)."""
    logits = torch.tensor([2.0, 1.5, 1.0, 0.2, -0.5, -1.0, -3.0, 0.9])
    rows = _rows(device, 8192, 512)
    top_k = 6 if device == "cuda" else 0
    x = logits.expand(rows, -1).contiguous()
    got = mn.sample(x.to(device), temperature=0.9, top_k=top_k, seed=torch.arange(rows).to(device) + 1234).cpu()
    counts = torch.bincount(got, minlength=8).double()
    probs = torch.zeros(8, dtype=torch.float64)
    top = torch.topk(logits, top_k or 8).indices
    probs[top] = torch.softmax(logits[top].double() / 0.9, -1)
    assert counts[probs == 0].sum() == 0
    expected = probs[probs > 0] * rows
    chi2 = ((counts[probs > 0] - expected) ** 2 / expected).sum().item()
    limit = {5: 20.52, 7: 24.32}[int((probs > 0).sum()) - 1]  # chi-square quantile at p = 0.001
    assert chi2 < limit, chi2


def test_temperature_zero_and_top_k_one_are_greedy(device):
    x = torch.randn(9, 777, device=device)
    seed = torch.tensor([3], device=device)
    assert torch.equal(mn.sample(x, temperature=0.0, seed=seed), mn.argmax(x))
    assert torch.equal(mn.sample(x, temperature=2.0, top_k=1, seed=seed), mn.argmax(x))


def test_int_seed_and_default_seed(device):
    x = torch.randn(2, 50, device=device)
    assert torch.equal(mn.sample(x, seed=9), mn.sample(x, seed=torch.tensor([9], device=device)))
    assert mn.sample(x).shape == (2,)


@pytest.mark.parametrize("kw,match", [
    (dict(temperature=-1.0), "temperature must be >= 0"),
    (dict(temperature=float("nan")), "temperature must be a finite number"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
    (dict(top_p=1.5), r"top_p must be in \(0, 1\]"),
    (dict(min_p=-0.1), r"min_p must be in \[0, 1\]"),
    (dict(top_k=-2), "top_k must be an int >= 0"),
    (dict(top_k=2.5), "top_k must be an int >= 0"),
])
def test_sample_bad_values(device, kw, match):
    with pytest.raises(mn.InvalidArgumentError, match=match):
        mn.sample(torch.randn(2, 10, device=device), seed=1, **kw)


def test_bad_tensors(device):
    x = torch.randn(3, 10, device=device)
    with pytest.raises(mn.InvalidArgumentError, match="seed must hold 1 value or one per row"):
        mn.sample(x, seed=torch.tensor([1, 2], device=device))
    with pytest.raises(mn.UnsupportedDTypeError, match="seed has dtype float32"):
        mn.sample(x, seed=torch.tensor([1.0], device=device))
    with pytest.raises(mn.UnsupportedDTypeError, match="logits has dtype int64"):
        mn.argmax(torch.zeros(3, 4, dtype=torch.int64, device=device))
    with pytest.raises(mn.InvalidArgumentError, match="empty last dim"):
        mn.argmax(torch.zeros(3, 0, device=device))
    with pytest.raises(mn.InvalidArgumentError, match="only the last axis"):
        mn.argmax(x, axis=0)


@pytest.mark.gpu
def test_sample_in_cuda_graph_advances_with_the_seed_tensor():
    x = torch.randn(1, 32000, device="cuda") * 2
    seed = torch.tensor([100], device="cuda")
    out = torch.zeros(1, dtype=torch.int64, device="cuda")

    def step():
        out.copy_(mn.sample(x, temperature=1.0, top_p=0.95, seed=seed))
        seed.add_(1)

    step()
    torch.cuda.synchronize()
    seed.fill_(100)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    replayed = []
    for _ in range(20):
        g.replay()
        replayed.append(out.item())
    eager = [mn.sample(x, temperature=1.0, top_p=0.95, seed=torch.tensor([100 + i], device="cuda")).item()
             for i in range(20)]
    assert replayed == eager


@pytest.mark.gpu
def test_large_vocab_gpu():
    x = torch.randn(4, 262144, device="cuda", dtype=torch.bfloat16) * 3
    assert torch.equal(mn.argmax(x).cpu(), x.float().cpu().argmax(-1))
    seeds = torch.arange(4, device="cuda")
    got = mn.sample(x, temperature=0.7, top_k=64, top_p=0.9, seed=seeds).cpu()
    want = ref.sample(x.cpu(), seeds.cpu(), 0.7, 64, 0.9, 0.0)
    assert (got != want).sum() <= 1
