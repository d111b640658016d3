"""Tokenizers (through the ``tokenizers`` package) and chat templates (``jinja2``).

Sources:
* GGUF metadata: ``tokenizer.ggml.model == "gpt2"`` (byte-level BPE, with the
  pre-tokenizer split chosen by ``tokenizer.ggml.pre`` as llama.cpp does) or
  ``"llama"`` (SentencePiece BPE with byte fallback; merges from the file or
  rebuilt from the scores). Control tokens become special tokens so that
  ``<|im_start|>`` in a rendered chat template encodes to one id.
* A directory with ``tokenizer.json`` (+ ``tokenizer_config.json``,
  ``chat_template.jinja``, ``generation_config.json``).
"""

from __future__ import annotations

import datetime
import json
import numbers
import os
from typing import Any, Iterable, Optional, Sequence

from ..errors import FormatError, InvalidArgumentError, UnsupportedError

# llama.cpp pre-tokenizer splits (llama-vocab.cpp), by tokenizer.ggml.pre
_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_PRE_SPLITS = {
    "llama3": [_LLAMA3_SPLIT], "llama-v3": [_LLAMA3_SPLIT], "llama-bpe": [_LLAMA3_SPLIT],
    "smaug-bpe": [_LLAMA3_SPLIT], "qwen2": [_QWEN2_SPLIT], "deepseek-r1-qwen": [_QWEN2_SPLIT],
    # SmolLM: single digits, then GPT-2's split
    "smollm": [r"\p{N}", _GPT2_SPLIT],
    "gpt2": [_GPT2_SPLIT], "default": [_GPT2_SPLIT],
}
_CONTROL, _USER_DEFINED = 3, 4


def _bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs)))


def _merges_from_scores(tokens: Sequence[str], scores: Sequence[float]) -> list[tuple[str, str]]:
    """SentencePiece BPE merges implied by a vocabulary: every split of a token
    into two tokens, best score first (as transformers' ``generate_merges``)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for tok, score in zip(tokens, scores):
        local = []
        for i in range(1, len(tok)):
            left, right = tok[:i], tok[i:]
            if left in vocab and right in vocab:
                local.append((left, right, score))
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: (m[2], len(m[0]), len(m[1])), reverse=True)
    return [(a, b) for a, b, _ in merges]


def _gguf_backend(meta: dict[str, Any], arch: str):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    kind = meta.get("ggml.model")
    tokens = list(meta.get("ggml.tokens") or [])
    types = list(meta.get("ggml.token_type") or [])
    if not tokens:
        raise FormatError("GGUF tokenizer: tokenizer.ggml.tokens is missing or empty")
    if kind == "gpt2":
        vocab = {t: i for i, t in enumerate(tokens)}
        merges = [tuple(m.split(" ", 1)) for m in meta.get("ggml.merges") or []]
        pre = meta.get("ggml.pre") or "default"
        splits = _PRE_SPLITS.get(pre, [_GPT2_SPLIT])
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False,
                                   ignore_merges=pre in ("llama3", "llama-v3", "llama-bpe")))
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(s), behavior="isolated") for s in splits]
            + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        alphabet = set(_bytes_to_unicode().values())
        special_ok = lambda t: set(t) <= alphabet  # noqa: E731  (mislabelled control tokens are skipped)
        add_space = False
    elif kind == "llama":
        scores = list(meta.get("ggml.scores") or [0.0] * len(tokens))
        if arch.startswith("gemma"):
            tokens = ["\u2581" * len(t) if " " in t and not t.strip() else t for t in tokens]
            scores = [-i for i in range(len(tokens))]  # Gemma's merge order is the token order
        vocab = {t: i for i, t in enumerate(tokens)}
        if meta.get("ggml.merges"):
            merges = [tuple(m.split(" ", 1)) for m in meta["ggml.merges"]]
        else:
            merges = _merges_from_scores(tokens, scores)
        unk_id = meta.get("ggml.unknown_token_id", 0)
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=tokens[unk_id] if unk_id is not None else None,
                                   fuse_unk=True, byte_fallback=True))
        add_space = bool(meta.get("ggml.add_space_prefix", not arch.startswith("gemma")))
        norms = [normalizers.Replace(" ", "\u2581")]
        if add_space:
            norms.insert(0, normalizers.Prepend("\u2581"))
        tok.normalizer = normalizers.Sequence(norms)
        decs = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
        if add_space:
            decs.append(decoders.Strip(" ", 1, 0))
        tok.decoder = decoders.Sequence(decs)
        special_ok = lambda t: True  # noqa: E731
    else:
        raise UnsupportedError(f"GGUF tokenizer model {kind!r} is not supported; supported: gpt2 (byte-level BPE), "
                               f"llama (SentencePiece BPE)")
    control = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types)
               if ty == _CONTROL and special_ok(t)]
    user = [AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == _USER_DEFINED]
    if control:
        tok.add_special_tokens(control)
    if user:
        tok.add_tokens(user)
    return tok, add_space


class Tokenizer:
    """Text <-> token ids, special tokens and the chat template.

    Attributes:
        bos_token_id, eos_token_ids: special ids (``eos_token_ids`` is a set:
            generation stops at any of them).
        chat_template: the Jinja2 chat template or None.
        add_bos: whether :meth:`encode` with ``add_special_tokens`` prepends BOS.
    """

    def __init__(self, backend, *, bos_token_id: Optional[int], eos_token_ids: Iterable[int],
                 chat_template: Optional[str], add_bos: bool, add_eos: bool = False,
                 extra_template_vars: Optional[dict] = None):
        self.backend = backend
        self.bos_token_id = bos_token_id
        ids = [i for i in eos_token_ids if i is not None]
        for i in ids + ([] if bos_token_id is None else [bos_token_id]):
            if isinstance(i, bool) or not isinstance(i, numbers.Integral) or i < 0:
                raise FormatError(f"tokenizer: special token id {i!r} (bos / eos) is not a non-negative integer")
        self.eos_token_ids = {int(i) for i in ids}
        self.chat_template = chat_template
        self.add_bos = add_bos
        self.add_eos = add_eos
        self.extra_template_vars = extra_template_vars or {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_gguf(cls, meta: dict[str, Any], arch: str = "llama") -> "Tokenizer":
        backend, _ = _gguf_backend(meta, arch)
        kind = meta.get("ggml.model")
        eos = meta.get("ggml.eos_token_id")
        eos_ids = [eos]
        eot = meta.get("ggml.eot_token_id")
        if eot is not None:
            eos_ids.append(eot)
        for extra in meta.get("ggml.eog_token_ids") or []:
            eos_ids.append(extra)
        template = meta.get("chat_template")
        add_bos = bool(meta.get("ggml.add_bos_token", kind == "llama"))
        return cls(backend, bos_token_id=meta.get("ggml.bos_token_id"), eos_token_ids=eos_ids,
                   chat_template=template if isinstance(template, str) else None, add_bos=add_bos,
                   add_eos=bool(meta.get("ggml.add_eos_token", False)))

    @classmethod
    def from_dir(cls, path: str, config: Optional[dict] = None) -> "Tokenizer":
        from tokenizers import Tokenizer as Backend

        tj = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(tj):
            raise FormatError(f"{path}: no tokenizer.json (needed to tokenize; SentencePiece .model files are not "
                              f"supported)")
        try:
            backend = Backend.from_file(tj)
        except Exception as exc:  # noqa: BLE001
            raise FormatError(f"{tj}: cannot load the tokenizer: {exc}") from exc
        tcfg = _read_json(os.path.join(path, "tokenizer_config.json"))
        gen = _read_json(os.path.join(path, "generation_config.json"))
        config = config or {}
        template = tcfg.get("chat_template")
        if isinstance(template, list):  # [{"name": "default", "template": ...}, ...]
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default") or next(iter(named.values()), None)
        jinja = os.path.join(path, "chat_template.jinja")
        if template is None and os.path.isfile(jinja):
            with open(jinja) as f:
                template = f.read()
        if template is None:
            ct = _read_json(os.path.join(path, "chat_template.json"))
            template = ct.get("chat_template")
        if template is not None and not isinstance(template, str):
            raise FormatError(f"{path}: the chat template is a {type(template).__name__}, not a string")

        def token_id(value):
            if isinstance(value, dict):
                value = value.get("content")
            return backend.token_to_id(value) if isinstance(value, str) else None

        eos_ids: list = []
        for src in (config.get("eos_token_id"), gen.get("eos_token_id")):
            if isinstance(src, list):
                eos_ids.extend(src)
            elif src is not None:
                eos_ids.append(src)
        eos_ids.append(token_id(tcfg.get("eos_token")))
        bos = config.get("bos_token_id", token_id(tcfg.get("bos_token")))
        add_bos = bool(tcfg.get("add_bos_token", False))
        extra = {k: (v.get("content") if isinstance(v, dict) else v) for k, v in tcfg.items()
                 if k.endswith("_token") and isinstance(v, (str, dict))}
        return cls(backend, bos_token_id=bos, eos_token_ids=eos_ids, chat_template=template, add_bos=add_bos,
                   add_eos=bool(tcfg.get("add_eos_token", False)), extra_template_vars=extra)

    # ------------------------------------------------------------------ text <-> ids
    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def token_text(self, i: Optional[int]) -> str:
        return "" if i is None else (self.backend.id_to_token(int(i)) or "")

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; with ``add_special_tokens`` a BOS is prepended when the model wants one."""
        if not isinstance(text, str):
            raise InvalidArgumentError(f"encode: text must be a str, got {type(text).__name__}")
        ids = self.backend.encode(text, add_special_tokens=add_special_tokens).ids
        if add_special_tokens and self.add_bos and self.bos_token_id is not None and (
                not ids or ids[0] != self.bos_token_id):
            ids = [self.bos_token_id] + ids
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        return self.backend.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    # ------------------------------------------------------------------ chat
    def apply_chat_template(self, messages: list[dict[str, str]], add_generation_prompt: bool = True,
                            **kwargs: Any) -> str:
        """Render ``messages`` with the model's chat template (Jinja2, sandboxed).

        Raises:
            UnsupportedError: the model has no chat template.
        """
        if not self.chat_template:
            raise UnsupportedError("this model has no chat template; pass the raw prompt (--no-chat-template)")
        from jinja2.exceptions import TemplateError

        template = _compile_template(self.chat_template)
        variables = dict(self.extra_template_vars)
        variables.update(bos_token=self.token_text(self.bos_token_id),
                         eos_token=self.token_text(min(self.eos_token_ids)) if self.eos_token_ids else "")
        variables.update(kwargs)
        try:
            return template.render(messages=messages, add_generation_prompt=add_generation_prompt, **variables)
        except (TemplateError, TypeError, ValueError, KeyError, AttributeError) as exc:
            raise InvalidArgumentError(f"apply_chat_template: the chat template rejected the messages: "
                                       f"{type(exc).__name__}: {exc}") from None

    def detokenizer(self) -> "StreamingDetokenizer":
        return StreamingDetokenizer(self)


def _read_json(path: str) -> dict:
    if not os.path.isfile(path):
        return {}
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path}: invalid JSON: {exc}") from None


_TEMPLATES: dict[str, Any] = {}


def _compile_template(source: str):
    template = _TEMPLATES.get(source)
    if template is None:
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=["jinja2.ext.loopcontrols"])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
        try:
            template = env.from_string(source)
        except TemplateError as exc:
            raise FormatError(f"chat template does not compile: {exc}") from None
        _TEMPLATES[source] = template
    return template


class StreamingDetokenizer:
    """Turns a stream of token ids into text pieces, holding back incomplete UTF-8.

    ``add(token)`` returns the new text (possibly ""); ``finalize()`` the rest.
    Decodes a short window of recent tokens each step (as vLLM does), so the
    cost per token is constant.
    """

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        self.tokens: list[int] = []
        self.prefix = 0  # window start
        self.read = 0  # tokens already turned into text

    def add(self, token: int) -> str:
        self.tokens.append(int(token))
        dec = self.tokenizer.decode
        prefix_text = dec(self.tokens[self.prefix:self.read])
        new_text = dec(self.tokens[self.prefix:])
        if len(new_text) > len(prefix_text) and not new_text.endswith("\ufffd"):
            piece = new_text[len(prefix_text):]
            self.prefix, self.read = self.read, len(self.tokens)
            return piece
        return ""

    def finalize(self) -> str:
        dec = self.tokenizer.decode
        prefix_text = dec(self.tokens[self.prefix:self.read])
        new_text = dec(self.tokens[self.prefix:])
        self.prefix = self.read = len(self.tokens)
        return new_text[len(prefix_text):] if len(new_text) > len(prefix_text) else ""

    @property
    def text(self) -> str:
        return self.tokenizer.decode(self.tokens)
