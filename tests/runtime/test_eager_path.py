"""The eager fast path of the decode-size ops (norms, gated activations, rope): inline plan keys,
outputs allocated by ``torch.empty_like`` of the input (``runtime.memory.output_like``).

What must hold whatever the allocation shortcut: outputs are NaN-filled when ``MLX_NATIVE_NAN_FILL``
is on (read per call, not frozen into a plan), outputs are contiguous with the strides of
``torch.empty(shape)`` for any input layout, and an argument that is not a tensor raises on every call
without leaving a plan behind.
"""

import dataclasses

import pytest
import torch

import mlx_native as mn
from mlx_native.kernels.launch import Launch, recording
from mlx_native.ops.norms import api as norms_api
from mlx_native.runtime import env


def _qk(d):
    return torch.randn(3, 4, 16, device=d), torch.randn(3, 2, 16, device=d)


# (name, call on a device): each returns the op's output(s)
CALLS = [
    ("rms_norm", lambda d: mn.rms_norm(torch.randn(3, 40, device=d), torch.randn(40, device=d))),
    ("add_rms_norm", lambda d: mn.add_rms_norm(torch.randn(3, 40, device=d), torch.randn(3, 40, device=d))),
    ("l2_norm", lambda d: mn.l2_norm(torch.randn(3, 40, device=d))),
    ("silu_mul", lambda d: mn.silu_mul(torch.randn(3, 40, device=d), torch.randn(3, 40, device=d))),
    ("gelu_mul", lambda d: mn.gelu_mul(torch.randn(3, 40, device=d), torch.randn(3, 40, device=d))),
    ("sigmoid_mul", lambda d: mn.sigmoid_mul(torch.randn(3, 40, device=d), torch.randn(3, 40, device=d))),
    ("softcap", lambda d: mn.softcap(torch.randn(3, 40, device=d), 30.0)),
    ("rope", lambda d: mn.rope(torch.randn(1, 4, 3, 16, device=d), 16, offset=2)),
    ("rope_positions", lambda d: mn.rope(torch.randn(3, 4, 16, device=d), 16,
                                         positions=torch.arange(3, device=d)[:, None])),
    ("head_norm_rope", lambda d: mn.head_norm_rope(torch.randn(3, 4, 16, device=d), torch.randn(16, device=d),
                                                   positions=torch.arange(3, device=d))),
    ("rope_qk", lambda d: mn.rope_qk(*_qk(d), 16, positions=torch.arange(3, device=d)[:, None])),
    ("head_norm_rope_qk", lambda d: mn.head_norm_rope_qk(*_qk(d), None, None, positions=torch.arange(3, device=d))),
]


def _outputs(out):
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_nan_fill_is_read_per_call(monkeypatch, device, name, call):
    """With the launch stubbed out, what the op returns is what its allocation left: NaN once
    MLX_NATIVE_NAN_FILL is on, also for a plan built while it was off."""
    monkeypatch.setattr(Launch, "__call__", lambda self, *args: None)
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, nan_fill=False))
    torch.manual_seed(0)
    call(device)  # builds (or finds) the plan with the fill off
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, nan_fill=True))
    torch.manual_seed(0)
    for y in _outputs(call(device)):
        assert torch.isnan(y).all(), f"{name}: output not NaN-filled"


def test_recording_lists_launches_and_can_skip_them(monkeypatch, device):
    """``kernels.launch.recording``: the op's launches with their arguments; ``run=False`` leaves the output as
    allocated (NaN-filled here); ``Launch`` launches again after the block."""
    monkeypatch.setattr(env, "settings", dataclasses.replace(env.settings, nan_fill=True))
    x, w = torch.randn(3, 40, device=device), torch.randn(40, device=device)
    with recording(run=False) as seen:
        y = mn.rms_norm(x, w)
    assert [ln.kernel.__name__ for ln, _ in seen] == ["_norm_kernel"] and seen[0][1][0] is x
    assert torch.isnan(y).all()
    with recording() as seen:
        y = mn.rms_norm(x, w)
    assert len(seen) == 1 and torch.isfinite(y).all()
    torch.testing.assert_close(mn.rms_norm(x, w), y)


def _canonical(t: torch.Tensor) -> bool:
    return t.is_contiguous() and t.stride() == torch.empty(t.shape).stride()


def _layouts(d):
    """Inputs [1, 32] / [4, 32] of several layouts: contiguous, a size-1 dim with an odd stride
    (contiguous for torch, not canonical), the half of a fused projection (one row, row stride 64),
    strided rows."""
    return {
        "contiguous": torch.randn(4, 32, device=d),
        "odd size-1 stride": torch.randn(32, 1, device=d).t(),
        "half of a fused row": torch.randn(1, 64, device=d)[:, 32:],
        "strided rows": torch.randn(4, 64, device=d)[:, :32],
    }


@pytest.mark.parametrize("layout", ["contiguous", "odd size-1 stride", "half of a fused row", "strided rows"])
def test_outputs_contiguous_for_any_input_layout(device, layout):
    x = _layouts(device)[layout]
    w = torch.randn(32, device=device)
    other = torch.randn(x.shape, device=device)
    pos = torch.arange(x.shape[0], device=device)
    cases = {
        "rms_norm": (lambda: mn.rms_norm(x, w), lambda: mn.rms_norm(x.contiguous(), w)),
        "add_rms_norm": (lambda: mn.add_rms_norm(x, other, w), lambda: mn.add_rms_norm(x.contiguous(), other, w)),
        "silu_mul": (lambda: mn.silu_mul(x, other), lambda: mn.silu_mul(x.contiguous(), other)),
        "sigmoid_mul": (lambda: mn.sigmoid_mul(other, x), lambda: mn.sigmoid_mul(other, x.contiguous())),
        "rope": (lambda: mn.rope(x, 32, positions=pos), lambda: mn.rope(x.contiguous(), 32, positions=pos)),
        "head_norm_rope": (lambda: mn.head_norm_rope(x[None], w, positions=pos[:1]),
                           lambda: mn.head_norm_rope(x[None].contiguous(), w, positions=pos[:1])),
    }
    for name, (got, expected) in cases.items():
        outs, refs = _outputs(got()), _outputs(expected())
        for out, ref in zip(outs, refs):
            assert out.shape == ref.shape and _canonical(out), f"{name} {layout}: strides {out.stride()}"
            torch.testing.assert_close(out, ref, msg=f"{name} {layout}")


def test_non_tensor_arguments_raise_every_call_and_leave_no_plan(device):
    x = torch.randn(2, 8, device=device)
    for _ in range(2):
        with pytest.raises(mn.InvalidArgumentError, match="rms_norm: weight must be a torch.Tensor"):
            mn.rms_norm(x, [1.0] * 8)
        with pytest.raises(mn.InvalidArgumentError, match="rms_norm: x must be a torch.Tensor"):
            mn.rms_norm([[1.0] * 8], None)
        with pytest.raises(mn.InvalidArgumentError, match="add_rms_norm: residual must be a torch.Tensor"):
            mn.add_rms_norm(x, 1.0)
        with pytest.raises(mn.InvalidArgumentError, match="silu_mul: up must be a torch.Tensor"):
            mn.silu_mul(x, "up")
        with pytest.raises(mn.InvalidArgumentError, match="rope: positions must be a torch.Tensor"):
            mn.rope(x, 8, positions=[0, 1])
        with pytest.raises(mn.InvalidArgumentError, match="head_norm_rope: positions must be a torch.Tensor"):
            mn.head_norm_rope(x[None], None, positions=None)
    assert None not in norms_api._RMS_PLANS.plans and None not in norms_api._ADD_RMS_PLANS.plans


def test_plan_key_tells_layouts_apart(device):
    """Same shape and dtype, another stride, dtype or scalar: another plan, right results."""
    w = torch.randn(32, device=device)
    base = torch.randn(4, 64, device=device)
    for x in (base[:, :32].contiguous(), base[:, :32], base[:, 32:], base[:, :32].half()):
        wx = w.to(x.dtype)
        for eps in (1e-6, 1e-2):
            with mn.use_backend("reference"):
                expected = mn.rms_norm(x, wx, eps)
            torch.testing.assert_close(mn.rms_norm(x, wx, eps), expected)
