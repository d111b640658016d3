"""Model tests run whole forward passes: one intra-op thread per test process keeps
``pytest -n 2`` on a 2-core machine from oversubscribing the CPU."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
