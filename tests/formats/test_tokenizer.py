"""Tokenizers from GGUF metadata and tokenizer.json, chat templates, streaming detokenization."""

import os

import pytest

import mlx_native as mn
from mlx_native.formats import Tokenizer, default_model_path, load_checkpoint, load_tokenizer

TEXTS = ["Hello world! The year 2024 had 366 days.", "  leading spaces\n\nnew lines\ttabs",
         "émoji 🤗 and 中文, symbols: <|im_start|> {} [] ()", "def f(x):\n    return x ** 2  # square"]


@pytest.fixture(scope="module")
def smollm2():
    path = default_model_path()
    return path, load_tokenizer(load_checkpoint(path))


@pytest.fixture(scope="module")
def hf_tok():
    from transformers import AutoTokenizer

    path = default_model_path()
    return AutoTokenizer.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path))


def test_gguf_bpe_matches_transformers(smollm2, hf_tok):
    _, tok = smollm2
    for text in TEXTS:
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == hf_tok.encode(text, add_special_tokens=False), text
        assert tok.decode(ids) == text
    assert tok.encode("<|im_start|>user", add_special_tokens=False)[0] == 1  # control token stays whole


def test_chat_template_matches_transformers(smollm2, hf_tok):
    _, tok = smollm2
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    ours = tok.apply_chat_template(msgs, add_generation_prompt=True)
    theirs = hf_tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert ours == theirs
    default_system = tok.apply_chat_template([{"role": "user", "content": "x"}])
    assert "You are a helpful AI assistant named SmolLM" in default_system


def test_tokenizer_json_directory(smollm2, hf_tok, tmp_path):
    hf_tok.save_pretrained(str(tmp_path))
    tok = Tokenizer.from_dir(str(tmp_path), {"eos_token_id": 2})
    _, ours = smollm2
    for text in TEXTS:
        assert tok.encode(text, add_special_tokens=False) == ours.encode(text, add_special_tokens=False)
    assert 2 in tok.eos_token_ids
    msgs = [{"role": "user", "content": "Hi"}]
    assert tok.apply_chat_template(msgs) == ours.apply_chat_template(msgs)


def test_streaming_detokenizer_holds_partial_utf8(smollm2):
    _, tok = smollm2
    text = "naïve café 🤗🤗 中文 done"
    ids = tok.encode(text, add_special_tokens=False)
    detok = tok.detokenizer()
    pieces = [detok.add(i) for i in ids] + [detok.finalize()]
    assert "".join(pieces) == text
    assert all("\ufffd" not in p for p in pieces)


def _spm_meta(add_space=True):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [
        "\u2581", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "llo", "hello", "\u2581hello", "wo", "ld", "rld",
        "world", "\u2581world"]
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    types = [2, 3, 3] + [6] * 256 + [1] * (len(tokens) - 259)
    return {"ggml.model": "llama", "ggml.tokens": tokens, "ggml.scores": scores, "ggml.token_type": types,
            "ggml.bos_token_id": 1, "ggml.eos_token_id": 2, "ggml.unknown_token_id": 0,
            "ggml.add_space_prefix": add_space}


def test_sentencepiece_from_gguf_metadata():
    meta = _spm_meta()
    tok = Tokenizer.from_gguf(meta, "llama")
    ids = tok.encode("hello world")
    pieces = [meta["ggml.tokens"][i] for i in ids]
    assert pieces == ["<s>", "\u2581hello", "\u2581world"]  # BOS added (llama vocabularies default to it)
    assert tok.decode(ids, skip_special_tokens=True) == "hello world"
    ids = tok.encode("hé", add_special_tokens=False)  # é is not in the vocabulary: byte fallback
    assert [meta["ggml.tokens"][i] for i in ids][-2:] == ["<0xC3>", "<0xA9>"]
    assert tok.decode(ids) == "hé"


def test_tokenizer_errors(tmp_path):
    with pytest.raises(mn.UnsupportedError, match="'bert' is not supported; supported: gpt2"):
        Tokenizer.from_gguf({"ggml.model": "bert", "ggml.tokens": ["a"]})
    with pytest.raises(mn.FormatError, match="tokenizer.ggml.tokens is missing"):
        Tokenizer.from_gguf({"ggml.model": "gpt2"})
    with pytest.raises(mn.FormatError, match="no tokenizer.json"):
        Tokenizer.from_dir(str(tmp_path))
    tok = Tokenizer.from_gguf(_spm_meta(), "llama")
    tok.chat_template = None
    with pytest.raises(mn.UnsupportedError, match="no chat template"):
        tok.apply_chat_template([{"role": "user", "content": "x"}])


def test_bad_tokenizer_files(tmp_path):
    """A chat template that is not a string, bos / eos ids that are not integers (they raised TypeError at the first
    chat or ValueError in generate): FormatError at load naming them; a template that raises on the messages (its
    ``raise_exception``): InvalidArgumentError naming the template's message."""
    import json

    from models.tiny import save_tokenizer

    path = save_tokenizer(str(tmp_path / "t"))
    cfg_path = os.path.join(path, "tokenizer_config.json")
    with open(cfg_path) as f:
        good = json.load(f)

    def with_config(**changes):
        with open(cfg_path, "w") as f:
            json.dump(dict(good, **changes), f)

    with_config(chat_template=5)
    with pytest.raises(mn.FormatError, match="the chat template is a int, not a string"):
        Tokenizer.from_dir(path)
    with_config(chat_template="{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}")
    with pytest.raises(mn.InvalidArgumentError, match="rejected the messages: TemplateError: system first"):
        Tokenizer.from_dir(path).apply_chat_template([{"role": "user", "content": "x"}])
    with_config()
    with pytest.raises(mn.FormatError, match=r"special token id 'x' \(bos / eos\) is not a non-negative integer"):
        Tokenizer.from_dir(path, {"eos_token_id": [2, "x"]})
    with pytest.raises(mn.FormatError, match=r"special token id -1"):
        Tokenizer.from_dir(path, {"bos_token_id": -1})
