"""Runtime: env parsing, backend dispatch, errors, op registration (opcheck, torch.compile)."""

import pytest
import torch

import mlx_native as mn
from mlx_native.runtime import dispatch, env
from mlx_native.runtime.device import device_info
from mlx_native.runtime.memory import collapse_dims, index_levels, plan_rows
from op_cases import CASE_IDS, CASES


class TestEnv:
    def test_defaults(self):
        s = env.parse_settings({})
        assert (s.backend, s.nan_fill, s.triton_interpret) == ("auto", False, False)

    def test_values(self):
        s = env.parse_settings({"MLX_NATIVE_BACKEND": " Reference ", "MLX_NATIVE_NAN_FILL": "yes",
                                "TRITON_INTERPRET": "1"})
        assert (s.backend, s.nan_fill, s.triton_interpret) == ("reference", True, True)

    def test_mmv_mode(self):
        assert env.parse_settings({}).mmv == "auto"
        for raw, mode in (("auto", "auto"), ("1", "on"), ("On", "on"), ("yes", "on"), ("0", "off"), ("false", "off")):
            assert env.parse_settings({"MLX_NATIVE_MMV": raw}).mmv == mode
        with pytest.raises(mn.ConfigError, match="MLX_NATIVE_MMV='sometimes': expected auto, on"):
            env.parse_settings({"MLX_NATIVE_MMV": "sometimes"})

    def test_bad_values_name_the_variable(self):
        with pytest.raises(mn.ConfigError, match="MLX_NATIVE_BACKEND='cuda': expected one of auto, reference, triton"):
            env.parse_settings({"MLX_NATIVE_BACKEND": "cuda"})
        with pytest.raises(ValueError, match="MLX_NATIVE_NAN_FILL='maybe'"):
            env.parse_settings({"MLX_NATIVE_NAN_FILL": "maybe"})

    def test_every_variable_is_documented(self):
        import pathlib
        import re

        doc = (pathlib.Path(__file__).parents[2] / "docs" / "ENV.md").read_text()
        src = pathlib.Path(env.__file__).read_text()
        for name in set(re.findall(r'"(MLX_NATIVE_[A-Z_]+)"', src)):
            assert name in doc, f"{name} is parsed but not documented in docs/ENV.md"


class TestDispatch:
    def test_use_backend_scopes_and_restores(self):
        assert mn.current_backend() == env.settings.backend
        with mn.use_backend("reference"):
            assert mn.current_backend() == "reference"
            with mn.use_backend("triton"):
                assert mn.current_backend() == "triton"
            assert mn.current_backend() == "reference"
        assert mn.current_backend() == env.settings.backend
        with pytest.raises(mn.ConfigError, match="unknown backend 'gpu'"):
            with mn.use_backend("gpu"):
                pass

    def test_triton_on_cpu_without_interpreter_is_an_error(self, monkeypatch):
        monkeypatch.setattr(env, "settings", env.Settings(backend="triton", triton_interpret=False))
        with pytest.raises(mn.BackendError, match="rms_norm: backend 'triton' needs CUDA tensors"):
            mn.rms_norm(torch.ones(2, 4))
        monkeypatch.setattr(env, "settings", env.Settings(backend="auto", triton_interpret=False))
        assert not dispatch.use_triton("rms_norm", torch.ones(1))  # CPU tensors -> reference

    def test_nan_fill(self, monkeypatch):
        from mlx_native.runtime.memory import empty

        monkeypatch.setattr(env, "settings", env.Settings(nan_fill=True))
        assert torch.isnan(empty((3,), dtype=torch.float16, device="cpu")).all()
        assert (empty((3,), dtype=torch.int32, device="cpu") == -1).all()


class TestErrors:
    def test_hierarchy(self):
        assert issubclass(mn.InvalidArgumentError, ValueError) and issubclass(mn.InvalidArgumentError, mn.MlxError)
        assert issubclass(mn.UnsupportedDTypeError, TypeError)
        assert issubclass(mn.FormatError, ValueError)
        assert issubclass(mn.UnsupportedError, NotImplementedError)
        assert issubclass(mn.BackendError, RuntimeError)


class TestLayouts:
    def test_collapse(self):
        x = torch.empty(4, 6, 8)
        assert collapse_dims(x.shape, x.stride()) == [(192, 1)]
        y = x[:, ::2]
        assert collapse_dims(y.shape, y.stride()) == [(12, 16), (8, 1)]  # dims 0-1 merge, dim 2 does not
        z = x.transpose(0, 1)
        assert collapse_dims(z.shape, z.stride()) == [(6, 8), (4, 48), (8, 1)]

    def test_row_layout_two_levels(self):
        base = torch.arange(4 * 6 * 2 * 5).reshape(4, 6, 2, 5)
        x = base[:, :3, 1, :]
        lay = plan_rows(x.shape, x.stride())
        assert lay.two_level
        rows = torch.arange(lay.n_rows)
        starts = (rows // lay.inner) * lay.stride_outer + (rows % lay.inner) * lay.stride_inner
        assert torch.equal(base.flatten()[starts + x.storage_offset()], x[..., 0].flatten())

    def test_broadcast_index(self):
        t = torch.arange(2 * 5).reshape(2, 1, 5)
        shape = (2, 3, 5)
        expanded = t.expand(shape)
        idx = index_levels(expanded.shape, expanded.stride())
        r = torch.arange(30)
        off = (r // (idx.n1 * idx.n2)) * idx.s0 + ((r // idx.n2) % idx.n1) * idx.s1 + (r % idx.n2) * idx.s2
        assert torch.equal(t.flatten()[off], t.expand(shape).flatten())

    def test_row_layout_needs_copy_beyond_two_levels(self):
        x = torch.empty(3, 4, 5, 2, 8)[:, ::2, :, 0, :].transpose(0, 1)
        assert plan_rows(x.shape, x.stride()) is None

    def test_device_info_cpu(self):
        info = device_info("cpu")
        assert info.sm_count >= 1 and info.arch == (0, 0)


def _captured_op_calls(fn, args):
    """Trace ``fn`` with dynamo and return the (op, concrete args) of each mlx_native op it calls."""
    graphs = []

    def capture(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, fullgraph=True, backend=capture)(*args)
    calls = []
    for gm, inputs in graphs:
        placeholders = {n: t for n, t in zip((n for n in gm.graph.nodes if n.op == "placeholder"), inputs)}
        for node in gm.graph.nodes:
            if node.op == "call_function" and str(node.target).startswith("mlx_native."):
                concrete = tuple(placeholders.get(a, a) if isinstance(a, torch.fx.Node) else a for a in node.args)
                calls.append((node.target, concrete))
    return calls


@pytest.mark.parametrize("name,fn,make", CASES, ids=CASE_IDS)
def test_registered_op_passes_opcheck(name, fn, make):
    """Each public op reaches a torch.ops.mlx_native op whose schema and fake impl pass opcheck."""
    with mn.use_backend("reference"):
        calls = _captured_op_calls(fn, make("cpu"))
        assert calls, f"{name}: no torch.ops.mlx_native op in the traced graph"
        for op, args in calls:
            assert all(not isinstance(a, torch.fx.Node) for a in args), f"{name}: op input computed in-graph"
            torch.library.opcheck(op, args, test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("name,fn,make", CASES, ids=CASE_IDS)
def test_fullgraph_compile_traces_every_op(name, fn, make):
    """torch.compile(fullgraph=True) traces the public op (aot_eager on CPU; inductor runs on GPU)."""
    args = make("cpu")
    with mn.use_backend("reference"):
        compiled = torch.compile(fn, fullgraph=True, backend="aot_eager")
        got, expected = compiled(*args), fn(*args)
    torch.testing.assert_close(got, expected, equal_nan=True)
