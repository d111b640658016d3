"""Tiny random Hugging Face models of every supported architecture, saved as checkpoints."""

from __future__ import annotations

import os

import torch

SEQ = 21  # > the sliding windows below, so window masking is exercised


def _gemma3(tf):
    return tf.Gemma3TextConfig(
        vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, sliding_window=5, query_pre_attn_scalar=24,
        layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                         "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0}},
        final_logit_softcapping=30.0, max_position_embeddings=256)


def _gemma4(tf):
    return tf.Gemma4TextConfig(
        vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, global_head_dim=32, num_global_key_value_heads=1, attention_k_eq_v=True,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention",
                     "sliding_attention", "full_attention"],
        sliding_window=5, hidden_size_per_layer_input=8, vocab_size_per_layer_input=211, num_kv_shared_layers=2,
        final_logit_softcapping=30.0, use_double_wide_mlp=True, max_position_embeddings=256)


def configs(tf):
    """name -> (config, model class)."""
    return {
        "llama": (tf.LlamaConfig(vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                 tie_word_embeddings=False), tf.LlamaForCausalLM),
        "llama3_scaled_rope": (tf.LlamaConfig(
            vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=1, max_position_embeddings=256, tie_word_embeddings=True,
            rope_parameters={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 64, "rope_theta": 500000.0}),
            tf.LlamaForCausalLM),
        "mistral_window": (tf.MistralConfig(vocab_size=211, hidden_size=64, intermediate_size=96,
                                            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                            sliding_window=6, max_position_embeddings=256), tf.MistralForCausalLM),
        "qwen2": (tf.Qwen2Config(vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256),
                  tf.Qwen2ForCausalLM),
        "qwen3": (tf.Qwen3Config(vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                                 max_position_embeddings=256, tie_word_embeddings=True), tf.Qwen3ForCausalLM),
        # layer 1 dense (mlp_only_layers), 0 and 2 sparse: 8 experts, 2 a token
        "qwen3_moe": (tf.Qwen3MoeConfig(vocab_size=211, hidden_size=64, intermediate_size=96, moe_intermediate_size=32,
                                        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=24,
                                        num_experts=8, num_experts_per_tok=2, mlp_only_layers=[1],
                                        norm_topk_prob=True, max_position_embeddings=256), tf.Qwen3MoeForCausalLM),
        "gemma3": (_gemma3(tf), tf.Gemma3ForCausalLM),
        "gemma4": (_gemma4(tf), tf.Gemma4ForCausalLM),
    }


def make_hf_model(name: str, seed: int = 0, dtype=torch.float32):
    """A transformers model with random weights (norm weights and biases randomized too)."""
    import transformers as tf

    cfg, cls = configs(tf)[name]
    cfg._attn_implementation = "eager"
    cfg._experts_implementation = "eager"  # transformers' grouped_mm takes no float64 (the oracle)
    torch.manual_seed(seed)
    model = cls(cfg).eval()
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if p.dim() == 1:  # norms, biases: away from their init so a wrong convention shows
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if "norm" in pname and "gemma4" in name else 0.0))
            else:
                p.copy_(torch.randn_like(p) * 0.08)
        for bname, b in model.named_buffers():
            if bname.endswith("layer_scalar"):
                b.copy_(torch.rand_like(b) + 0.5)
    return model.to(dtype)


def save_hf(model, path: str) -> str:
    os.makedirs(path, exist_ok=True)
    model.save_pretrained(path)
    return path


CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")


def save_tokenizer(path: str, vocab_size: int = 211) -> str:
    """A word-level ``tokenizer.json`` (+ config with a chat template) for the tiny models:
    ids 0..3 are special, the rest are words ``w4`` ... and a few real ones."""
    import json

    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers

    specials = ["<unk>", "<|end|>", "<|user|>", "<|assistant|>"]
    words = ["hello", "world", "the", "a", "is", "of", "and", "to", "in", "it", "system", "<|system|>"]
    vocab = {t: i for i, t in enumerate(specials + words)}
    for i in range(len(vocab), vocab_size):
        vocab[f"w{i}"] = i
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    os.makedirs(path, exist_ok=True)
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"chat_template": CHAT_TEMPLATE, "eos_token": "<|end|>", "add_bos_token": False}, f)
    return path


def tiny_checkpoint(root: str, name: str = "llama", seed: int = 0, **config_overrides) -> str:
    """Save a tiny random HF model of ``name`` with a tokenizer under ``root``; returns the directory."""
    model = make_hf_model(name, seed)
    for k, v in config_overrides.items():
        setattr(model.config, k, v)
        if getattr(model, "generation_config", None) is not None and hasattr(model.generation_config, k):
            setattr(model.generation_config, k, v)
    path = os.path.join(root, name)
    save_hf(model, path)
    save_tokenizer(path, model.config.vocab_size)
    return path
