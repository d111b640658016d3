"""The ``mlx-native`` command: generate / bench / info, one-line errors, --verbose tracebacks."""

import json
import os
import subprocess
import sys

import pytest

import mlx_native as mn
from mlx_native.cli import main

pytestmark = pytest.mark.usefixtures("reference_backend_on_cpu")


def test_generate_streams_and_prints_the_footer(tiny_llama, capsys):
    assert main(["generate", "--model", tiny_llama, "-p", "hello world", "-m", "6", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert lines[0] == "=========="
    assert any(line.startswith("Prompt: ") and "tokens-per-sec" in line for line in lines)
    assert any(line.startswith("Generation: ") and "tokens-per-sec" in line for line in lines)
    assert lines[-1].startswith("Peak memory: ") and lines[-1].endswith(" GB")


def test_generate_sampling_flags(tiny_llama, capsys):
    args = ["generate", "--model", tiny_llama, "-p", "hello", "-m", "5", "--temp", "0.8", "--top-p", "0.9", "--top-k",
            "20", "--min-p", "0.05", "--seed", "3", "--system", "the system", "--repetition-penalty", "1.2",
            "--device", "cpu"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out.split("==========")[1] == first.split("==========")[1]  # same seed, same text
    assert main(["generate", "--model", tiny_llama, "-p", "hello", "-m", "3", "--no-chat-template", "--device", "cpu"]) == 0


@pytest.mark.parametrize("args,match", [
    (["generate", "--model", "/nonexistent/model.gguf"], "model path '/nonexistent/model.gguf' does not exist"),
    (["generate", "--temp", "-1"], "temp must be >= 0"),
    (["generate", "--top-p", "1.5"], r"top_p must be in \(0, 1\]"),
    (["generate", "--min-p", "-0.2"], r"min_p must be in \[0, 1\]"),
    (["generate", "--top-k", "-4"], "top_k must be an int >= 0"),
    (["generate", "-m", "-1"], "max_tokens must be an int >= 0"),
    (["generate", "--dtype", "int8"], "--dtype must be one of"),
    (["generate", "-p", "hello " * 80], "the prompt has .* tokens, more than the model's context of 64"),
])
def test_bad_input_is_one_line(tiny_llama, capsys, args, match):
    import re

    if "--model" not in args:
        args = args[:1] + ["--model", tiny_llama, "--device", "cpu"] + args[1:]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("mlx-native: error: ") and re.search(match, err), err
    assert "Traceback" not in err


def test_bad_settings_fail_before_the_model_loads(capsys, monkeypatch):
    """Sampling settings are checked before the model loads: a bad temperature with a missing model names the
    temperature, and nothing is loaded."""
    import sys

    gen = sys.modules["mlx_native.generate"]  # (the package's ``generate`` is the function)
    monkeypatch.setattr(gen, "load", lambda *a, **k: pytest.fail("the model was loaded"))
    assert main(["generate", "--model", "/nonexistent/model.gguf", "--temp", "-1"]) == 2
    out = capsys.readouterr()
    assert "temp must be >= 0" in out.err and "==========" not in out.out


def test_corrupt_model_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 30)
    assert main(["generate", "--model", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mlx-native: error: ") and "offset" in err and len(err.strip().splitlines()) == 1


def test_verbose_raises_with_traceback(tiny_llama):
    with pytest.raises(mn.InvalidArgumentError):
        main(["generate", "--verbose", "--model", tiny_llama, "--device", "cpu", "--temp", "-1"])
    with pytest.raises(mn.InvalidArgumentError):
        main(["--verbose", "generate", "--model", "/nonexistent"])


def test_info(tiny_llama, capsys):
    assert main(["info", tiny_llama, "--tensors"]) == 0
    out = capsys.readouterr().out
    assert "architecture:  llama  (supported: yes)" in out and "format:        hf" in out
    assert "model.layers.0.mlp.down_proj.weight" in out and "F32" in out


def test_info_default_model(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "SmolLM2-135M-Instruct.Q4_1.gguf" in out and "Q4_1 x210" in out and "Q8_0 x1" in out
    assert "hidden_size:" in out and "576" in out


def test_bench_json_and_markdown(tiny_llama, capsys):
    assert main(["bench", "--model", tiny_llama, "--device", "cpu", "-p", "16", "-n", "4", "-r", "2", "-o", "json"]) == 0
    res = json.loads(capsys.readouterr().out)
    tests = {r["test"]: r for r in res["results"]}
    assert set(tests) == {"pp16", "tg4"} and all(r["mean"] > 0 and len(r["tps"]) == 2 for r in tests.values())
    assert main(["bench", "--model", tiny_llama, "--device", "cpu", "-p", "8", "-n", "2", "-r", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "| model | size | params | backend | test | t/s |"
    assert "| pp8 |" in out and "| tg2 |" in out and " ± " in out


def test_bench_depth_prefills_before_each_test(tiny_llama, capsys, monkeypatch):
    """``-d``: every rep fills the cache with that many tokens first (in ``DEPTH_CHUNK`` chunks), the pp test
    continues from there and the tg test decodes after them; the tests are named as llama-bench names them."""
    from mlx_native import cli
    from mlx_native.models.base import CausalLM

    monkeypatch.setattr(cli, "DEPTH_CHUNK", 4)
    calls = []
    forward = CausalLM.forward

    def spy(self, tokens, cache, start=None, all_logits=False):
        calls.append((tokens.shape[1], start, cache.offset if start is None else None, int(cache.lens[0])))
        return forward(self, tokens, cache, start, all_logits)

    monkeypatch.setattr(CausalLM, "forward", spy)
    assert main(["bench", "--model", tiny_llama, "--device", "cpu", "-p", "3", "-n", "2", "-d", "10", "-r", "1",
                 "-o", "json"]) == 0
    tests = {r["test"]: r for r in json.loads(capsys.readouterr().out)["results"]}
    assert set(tests) == {"pp3 @ d10", "tg2 @ d10"}
    fills = [(4, 0, None, 0), (4, 4, None, 4), (2, 8, None, 8)]
    assert calls[:8] == fills + [(3, 10, None, 10)] + fills + [(3, 10, None, 10)]  # warm-up rep, timed rep
    steps = [(1, None, 10, 10), (1, None, 10, 11)]  # decode steps (on the CPU no graph) after the depth's tokens
    assert calls[8:] == fills + steps + fills + steps  # two reps (warm-up, timed), each filling the cache first
    assert main(["bench", "--model", tiny_llama, "--device", "cpu", "-d", "-1"]) == 2
    assert capsys.readouterr().err.strip() == "mlx-native: error: -p/-n/-d must be >= 0"


def test_console_script_error_has_no_traceback():
    exe = os.path.join(os.path.dirname(sys.executable), "mlx-native")
    cmd = [exe] if os.path.exists(exe) else [sys.executable, "-m", "mlx_native.cli"]
    proc = subprocess.run(cmd + ["generate", "--model", "/nonexistent"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "mlx-native: error: model path '/nonexistent' does not exist"
