"""`tilecore.testing`: the test helpers TileLang kernels' scripts import (`set_random_seed`, ...)."""

from __future__ import annotations

import importlib.util
import random

import numpy as np

from .utils.tensor import torch_assert_close


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, NumPy's and (when installed) torch's generators."""
    random.seed(seed)
    np.random.seed(seed)
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.manual_seed(seed)


def requires_package(*names: str):
    """A pytest mark skipping a test when one of the packages `names` is not installed."""
    import pytest

    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)}")


def main() -> None:
    """Run the calling test file's tests with pytest (TileLang's `tilelang.testing.main()`)."""
    import inspect

    import pytest

    frame = inspect.stack()[1]
    raise SystemExit(pytest.main([frame.filename, "-q"]))


__all__ = ["set_random_seed", "torch_assert_close", "requires_package", "main"]
