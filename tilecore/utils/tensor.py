"""Input generation and tolerant comparison of torch tensors (TileLang's `utils.tensor` names)."""

from __future__ import annotations

import numpy as np

from ..profiler import TensorSupplyType  # the one definition (TileLang's names)


def get_tensor_supply(supply_type: str = TensorSupplyType.Integer):
    """A function Buffer -> torch (CPU) tensor of its shape and dtype, filled per `supply_type`
    by the profiler's one generator (`tilecore.profiler.random_array`)."""
    from ..kernel import _from_numpy
    from ..profiler import random_array

    rng = np.random.default_rng()

    def make(p):
        shape = tuple(int(s) for s in p.shape)
        return _from_numpy(random_array(shape, p.dtype, supply_type, rng))

    return make


def torch_assert_close(tensor_a, tensor_b, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False,
                       equal_nan: bool = True, check_device: bool = True, check_dtype: bool = True,
                       check_layout: bool = True, check_stride: bool = False,
                       base_name: str = "LHS", ref_name: str = "RHS") -> None:
    """Raise AssertionError unless at most `max_mismatched_ratio` of the elements differ by more
    than `atol + rtol * |b|` (torch.isclose). Shapes must match; with `check_dtype`, dtypes too."""
    import torch

    if tensor_a.shape != tensor_b.shape:
        raise AssertionError(f"shape mismatch: {base_name} {tuple(tensor_a.shape)} vs "
                             f"{ref_name} {tuple(tensor_b.shape)}")
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"dtype mismatch: {base_name} {tensor_a.dtype} vs {ref_name} {tensor_b.dtype}")
    a = tensor_a.detach().to("cpu", torch.float64)
    b = tensor_b.detach().to("cpu", torch.float64)
    close = torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    bad = int((~close).sum())
    total = max(1, close.numel())
    if bad / total > max_mismatched_ratio:
        diff = (a - b).abs()
        diff[close] = 0
        idx = int(torch.argmax(diff.flatten()))
        raise AssertionError(
            f"{bad} of {total} elements ({100 * bad / total:.2f}%) are not close (allowed "
            f"{100 * max_mismatched_ratio:.2f}%, rtol={rtol}, atol={atol}); the largest difference "
            f"is at flat index {idx}: {base_name}={a.flatten()[idx].item()} "
            f"{ref_name}={b.flatten()[idx].item()}")
    if verbose:
        print(f"{base_name} and {ref_name} are close ({bad} of {total} elements outside tolerance)")


__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close"]
