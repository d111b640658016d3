"""The runner on tiny models: streaming, EOS, seeds, repetition penalty, chat
template, the Python API's typed errors."""


import importlib

import pytest
import torch

import mlx_native as mn
from mlx_native.generate import encode_prompt

pytestmark = pytest.mark.usefixtures("reference_backend_on_cpu")


@pytest.fixture(scope="module")
def loaded(tiny_llama):
    return mn.load(tiny_llama, device="cpu")


def test_load_defaults_and_source(loaded):
    model, tok = loaded
    assert model.dtype == torch.float32 and model.device.type == "cpu"
    assert model.source["format"] == "hf" and model.source["model_type"] == "llama"
    assert tok.chat_template and tok.eos_token_ids == {1}


def test_stream_equals_generate_and_greedy_is_argmax(loaded):
    model, tok = loaded
    ids = [5, 9, 12, 40, 77]
    with mn.use_backend("reference"):
        stream = list(mn.stream_generate(model, tok, ids, max_tokens=12))
        text = mn.generate(model, tok, ids, max_tokens=12)
        # greedy = argmax of a full forward over the growing sequence
        seq = list(ids)
        for r in stream:
            with torch.no_grad():
                logits = model.forward(torch.tensor([seq]), model.new_cache(1, 64), start=0)
            assert r.token == int(logits.argmax(-1))
            seq.append(r.token)
    assert "".join(r.text for r in stream) == text
    last = stream[-1]
    assert last.prompt_tokens == 5 and last.generation_tokens == len(stream)
    assert last.finish_reason in ("stop", "length") and all(r.finish_reason is None for r in stream[:-1])
    assert last.peak_memory > 0 and last.generation_tps > 0 and last.prompt_tps > 0


def test_stops_at_eos(loaded):
    model, tok = loaded
    tok2 = type(tok)(tok.backend, bos_token_id=None, eos_token_ids=[], chat_template=None, add_bos=False)
    first = [r.token for r in mn.stream_generate(model, tok2, [5, 6, 7], max_tokens=10)]
    tok2.eos_token_ids = {first[3]}
    stopped = list(mn.stream_generate(model, tok2, [5, 6, 7], max_tokens=10))
    assert [r.token for r in stopped] == first[:first.index(first[3]) + 1]
    assert stopped[-1].finish_reason == "stop"


def test_sampling_is_reproducible_and_penalty_changes_it(loaded):
    model, tok = loaded
    kw = dict(max_tokens=16, temp=1.0, top_p=0.95, top_k=50, min_p=0.01)
    a = [r.token for r in mn.stream_generate(model, tok, [5, 9], seed=3, **kw)]
    b = [r.token for r in mn.stream_generate(model, tok, [5, 9], seed=3, **kw)]
    c = [r.token for r in mn.stream_generate(model, tok, [5, 9], seed=4, **kw)]
    assert a == b and a != c
    greedy = [r.token for r in mn.stream_generate(model, tok, [5, 9], max_tokens=16)]
    penalized = [r.token for r in mn.stream_generate(model, tok, [5, 9], max_tokens=16, repetition_penalty=5.0,
                                                     repetition_context_size=8)]
    assert greedy != penalized
    assert len(set(penalized)) >= len(set(greedy))


def test_chat_template_and_system(loaded):
    model, tok = loaded
    ids = encode_prompt(tok, "hello world", system="the system")
    text = tok.decode(ids)
    assert text.split() == ["<|system|>", "the", "system", "<|end|>", "<|user|>", "hello", "world", "<|end|>",
                            "<|assistant|>"]
    assert encode_prompt(tok, "hello world", chat_template=False) == tok.encode("hello world")
    msgs = [{"role": "user", "content": "hello"}]
    assert encode_prompt(tok, msgs) == tok.encode(tok.apply_chat_template(msgs), add_special_tokens=False)


def test_prompt_longer_than_context(loaded):
    model, tok = loaded
    with pytest.raises(mn.InvalidArgumentError, match="the prompt has 64 tokens, more than the model's context"):
        mn.generate(model, tok, list(range(5, 69)))
    # a prompt that fits leaves room: max_tokens is clamped to the context
    out = list(mn.stream_generate(model, tok, list(range(5, 65)), max_tokens=100))
    assert len(out) <= 4


@pytest.mark.parametrize("kw,match", [
    (dict(temp=-0.5), "temp must be >= 0"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\]"),
    (dict(min_p=2.0), r"min_p must be in \[0, 1\]"),
    (dict(top_k=-1), "top_k must be an int >= 0"),
    (dict(max_tokens=-3), "max_tokens must be an int >= 0"),
    (dict(repetition_penalty=0.0), "repetition_penalty must be > 0"),
    (dict(seed="x"), "seed must be an int"),
    (dict(temp=float("inf")), "temp must be a finite number"),
])
def test_invalid_sampling_values(loaded, kw, match):
    model, tok = loaded
    with pytest.raises(mn.InvalidArgumentError, match=match):
        mn.generate(model, tok, [5, 6], **kw)


def test_bad_prompts(loaded):
    model, tok = loaded
    with pytest.raises(mn.InvalidArgumentError, match="prompt is empty"):
        mn.generate(model, tok, [])
    with pytest.raises(mn.InvalidArgumentError, match="token id 999 is out of range"):
        mn.generate(model, tok, [5, 999])
    with pytest.raises(mn.InvalidArgumentError, match="prompt must be a str"):
        mn.generate(model, tok, 3.5)


def test_load_errors(tmp_path):
    with pytest.raises(mn.InvalidArgumentError, match="does not exist"):
        mn.load(str(tmp_path / "nope.gguf"))
    with pytest.raises(mn.InvalidArgumentError, match="dtype must be"):
        mn.load(str(tmp_path), dtype=torch.int8)
    if not torch.cuda.is_available():
        with pytest.raises(mn.InvalidArgumentError, match="no CUDA GPU"):
            mn.load(str(tmp_path), device="cuda")


@pytest.mark.gpu
def test_gpu_graph_and_eager_decode_agree(tiny_llama):
    model, tok = mn.load(tiny_llama, device="cuda")
    for kw in (dict(), dict(temp=0.9, top_k=20, seed=1, repetition_penalty=1.3)):
        g = [r.token for r in mn.stream_generate(model, tok, [5, 9, 11], max_tokens=30, cuda_graph=True, **kw)]
        e = [r.token for r in mn.stream_generate(model, tok, [5, 9, 11], max_tokens=30, cuda_graph=False, **kw)]
        assert g == e


def test_prefill_graph_needs_cuda(loaded):
    model, _ = loaded
    with pytest.raises(mn.InvalidArgumentError, match="PrefillGraph: CUDA graphs need a CUDA model"):
        mn.PrefillGraph(model, model.new_cache(1, 16), 8)


@pytest.mark.gpu
def test_gpu_prefill_graph_replays_equal_eager_chunks(tiny_llama):
    """One graph of a 12-token chunk replayed at cache lengths 0, 12 and 24 (as a chunked prompt runs): the
    logits and the cache equal the eager device-driven chunks', and the host-known one-chunk prefill's within
    float32 (TF32 dots) rounding."""
    model, _ = mn.load(tiny_llama, device="cuda", dtype=torch.float32)
    ids = torch.randint(0, model.vocab_size, (1, 36), generator=torch.Generator().manual_seed(3)).cuda()
    with torch.inference_mode():
        eager = model.new_cache(1, 48)
        want = [model.forward(ids[:, i:i + 12], eager, start=None) for i in (0, 12, 24)]
        cache = model.new_cache(1, 48)
        graph = mn.PrefillGraph(model, cache, 12)
        assert int(cache.lens[0]) == 0  # the warm-up's lengths restored
        got = [graph(ids[:, i:i + 12]).clone() for i in (0, 12, 24)]
        assert int(cache.lens[0]) == 36 and int(cache.next_lens[0]) == 37 and cache.offset == 36
        for w, g in zip(want, got):
            assert torch.equal(w, g)
        for a, b in zip(eager.layers, cache.layers):
            assert torch.equal(a.k[:, :, :36], b.k[:, :, :36]) and torch.equal(a.v[:, :, :36], b.v[:, :, :36])
        host = model.forward(ids, model.new_cache(1, 48), start=0)
        assert (host - got[-1]).abs().max().item() <= 5e-3 * host.abs().max().item()
        with pytest.raises(mn.InvalidArgumentError, match=r"PrefillGraph: tokens of shape \(1, 5\)"):
            graph(ids[:, :5])


@pytest.mark.gpu
@pytest.mark.parametrize("host_bound_share,graphs", [(0.0, 1), (2.0, 0)])
def test_gpu_generate_prefill_chunks_from_a_graph(tiny_llama, monkeypatch, host_bound_share, graphs):
    """A prompt of 4 whole chunks and a partial one: with its first chunk taken as host-bound (share 0) the
    next whole chunks replay one captured PrefillGraph, else (share 2) none is captured; the tokens equal the
    eager generation's either way."""
    gen = importlib.import_module("mlx_native.generate")  # the module: mlx_native.generate is the function

    model, tok = mn.load(tiny_llama, device="cuda")
    prompt = [5 + (7 * i) % 90 for i in range(41)]  # the model's context is 64
    made = []
    real = gen.PrefillGraph
    monkeypatch.setattr(gen, "PrefillGraph", lambda *a, **k: made.append(a[2]) or real(*a, **k))
    monkeypatch.setattr(gen, "HOST_BOUND_SHARE", host_bound_share)
    monkeypatch.setattr(gen, "PREFILL_GRAPHS_IN_GENERATE", True)
    got = [r.token for r in mn.stream_generate(model, tok, prompt, max_tokens=16, prefill_step_size=9)]
    assert made == [9] * graphs
    want = [r.token for r in mn.stream_generate(model, tok, prompt, max_tokens=16, prefill_step_size=9,
                                                cuda_graph=False)]
    assert got == want


@pytest.mark.parametrize("host_bound_share", [0.0, 2.0])
def test_prefill_chunk_rule_bookkeeping(loaded, monkeypatch, host_bound_share):
    """``generate._prefill``'s orchestration on the CPU, CUDA graphs stood in for by eager device-driven forwards: a
    prompt of 4 whole chunks and a partial one gives the logits and cache lengths of the plain chunked prefill, with
    a graph made from the first chunk when it counts as host-bound (share 0), none otherwise (share 2)."""
    gen = importlib.import_module("mlx_native.generate")  # the module: mlx_native.generate is the function

    model, _ = loaded
    made = []

    class EagerGraph:
        def __init__(self, model_, cache, length, warm=True):
            assert not warm and cache.offset == length == int(cache.lens[0])
            made.append(length)
            self.model, self.cache = model_, cache

        def __call__(self, tokens):
            self.cache.offset += tokens.shape[1]
            return self.model.forward(tokens, self.cache)

    monkeypatch.setattr(gen, "PrefillGraph", EagerGraph)
    monkeypatch.setattr(gen, "side_stream_forward", lambda m, c, t: m.forward(t, c))
    monkeypatch.setattr(gen.torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(gen, "HOST_BOUND_SHARE", host_bound_share)
    monkeypatch.setattr(gen, "PREFILL_GRAPHS_IN_GENERATE", True)
    prompt = torch.tensor([[5 + (7 * i) % 90 for i in range(41)]])
    with torch.no_grad():
        cache = model.new_cache(1, 64)
        got = gen._prefill(model, cache, prompt, 9, True)
        assert made == ([9] if host_bound_share == 0.0 else [])
        assert cache.offset == 41 and int(cache.lens[0]) == 41 and int(cache.next_lens[0]) == 42
        plain = model.new_cache(1, 64)
        want = gen._prefill(model, plain, prompt, 9, False)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-5)
