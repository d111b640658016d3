"""SmolLM2 on the GPU, precision diagnosis: greedy answers and teacher-forced agreement of our model
(bf16 / fp16 / fp32 activations, quantized or dequantized weights) and of transformers (fp32, bf16).

    MLX_NATIVE_SMOLLM2_GGUF=... python scripts/smollm2_diag.py
"""

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "models"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import mlx_native as mn  # noqa: E402
from mlx_native.generate import encode_prompt  # noqa: E402
from test_smollm2 import PROMPTS, TEXT, _gguf_path, _plain  # noqa: E402


def main():
    from transformers import AutoModelForCausalLM

    path = _gguf_path()
    hf = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path),
                                              dtype=torch.float32).eval()
    tok = mn.load(path, device="cpu")[1]
    prompt = encode_prompt(tok, PROMPTS[0])
    text = tok.encode(TEXT, add_special_tokens=False)[:300]
    ref_models = {"hf fp32": _plain(hf, torch.float32, "cuda"), "hf bf16": _plain(hf, torch.bfloat16, "cuda"),
                  "hf fp16": _plain(hf, torch.float16, "cuda")}
    with torch.no_grad():
        ref = ref_models["hf fp32"](torch.tensor([text], device="cuda")).logits[0].float()
        for name, m in ref_models.items():
            logits = m(torch.tensor([text], device="cuda")).logits[0].float()
            agree = (logits.argmax(-1) == ref.argmax(-1)).float().mean().item()
            out = m.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=12, do_sample=False, top_p=None,
                             top_k=None, temperature=None, pad_token_id=2)
            first = m(torch.tensor([prompt], device="cuda")).logits[0, -1].float()
            print(f"{name:28s} agree {agree:.4f} | first top5 {first.topk(5).indices.tolist()} "
                  f"{[round(v, 2) for v in first.topk(5).values.tolist()]} | "
                  f"{tok.decode(out[0, len(prompt):].tolist())!r}", flush=True)
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        for keep in (True, False):
            name = f"ours {str(dtype)[6:]} {'quant' if keep else 'dequant'}"
            try:
                model, _ = mn.load(path, device="cuda", dtype=dtype, keep_quantized=keep)
                with torch.no_grad():
                    cache = model.new_cache(1, len(text))
                    chunks = [model.forward(torch.tensor([text[s:s + 128]], device="cuda"), cache, start=s,
                                            all_logits=True) for s in range(0, len(text), 128)]
                    ours = torch.cat(chunks, 1)[0].float()
                    cache = model.new_cache(1, len(prompt) + 1)
                    first = model.forward(torch.tensor([prompt], device="cuda"), cache, start=0)[0].float()
                agree = (ours.argmax(-1) == ref.argmax(-1)).float().mean().item()
                cos = torch.nn.functional.cosine_similarity(ours, ref, dim=-1)
                greedy = [r.token for r in mn.stream_generate(model, tok, prompt, max_tokens=12)]
                eager = [r.token for r in mn.stream_generate(model, tok, prompt, max_tokens=12, cuda_graph=False)]
                print(f"{name:28s} agree {agree:.4f} cos mean {cos.mean():.6f} min {cos.min():.6f} | first top5 "
                      f"{first.topk(5).indices.tolist()} {[round(v, 2) for v in first.topk(5).values.tolist()]} | "
                      f"{tok.decode(greedy)!r} graph==eager {greedy == eager}", flush=True)
            except Exception as exc:  # noqa: BLE001 - a diagnosis prints every variant it can
                print(f"{name:28s} failed: {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()
