"""Test setup.

Without a CUDA GPU, the Triton kernels run on CPU tensors through Triton's
interpreter (``TRITON_INTERPRET=1``, set here before Triton is imported) on
small shapes; tests marked ``gpu`` are deselected. On the device machine the
same tests run on CUDA tensors and ``-m gpu`` adds the real-size ones.
Outputs are NaN-prefilled (``MLX_NATIVE_NAN_FILL=1``) so unwritten elements fail.
``MLX_NATIVE_MMV=on``: the tensor-core decode kernel takes every call it supports, also the small
shapes that its measured routing (``auto``, tested on its own) sends elsewhere.
"""

import os
import zlib

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("MLX_NATIVE_NAN_FILL", "1")
os.environ.setdefault("MLX_NATIVE_MMV", "on")

import mlx_native  # noqa: E402  (after the environment is set)
from mlx_native.runtime import env  # noqa: E402

env.reload_settings()
if env.settings.triton_interpret:
    import interpreter_shims

    interpreter_shims.apply()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    kept = [item for item in items if "gpu" not in item.keywords]
    dropped = [item for item in items if "gpu" in item.keywords]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def device() -> str:
    """Where the kernels under test run: CUDA if present, else the CPU interpreter."""
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture(autouse=True)
def _seed(request):
    """A fresh, reproducible seed per test (derived from its id)."""
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
    yield


@pytest.fixture
def reference_backend_on_cpu():
    """Runner/CLI tests check the runner's logic: on the CPU they take the exact PyTorch path
    (fast; the kernels are covered by tests/models/test_architectures.py), on a GPU the kernels."""
    if HAS_CUDA:
        yield
        return
    with mlx_native.use_backend("reference"):
        yield


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory) -> str:
    """A tiny random Llama checkpoint (HF layout) with a 64-token context and EOS id 1."""
    from models.tiny import tiny_checkpoint

    return tiny_checkpoint(str(tmp_path_factory.mktemp("tiny_llama")), "llama", max_position_embeddings=64,
                           eos_token_id=1, bos_token_id=None)
