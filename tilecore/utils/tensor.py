"""Input generation and tolerant comparison of torch tensors (TileLang's `utils.tensor` names)."""

from __future__ import annotations

from .. import dtypes as dt
from ..profiler import TensorSupplyType  # the one definition (TileLang's names)


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer):
    """A function Buffer -> torch tensor of its shape and dtype, filled per `supply_type`."""
    import torch

    def make(p):
        shape = tuple(int(s) for s in p.shape)
        d = p.dtype
        tdt = dt.torch_dtype(d)
        kind = supply_type
        if kind == TensorSupplyType.Auto:
            kind = TensorSupplyType.Uniform if d.is_float and d.bits >= 16 else TensorSupplyType.Integer
        if kind == TensorSupplyType.Integer or not d.is_float:
            if kind in (TensorSupplyType.Zero, TensorSupplyType.One):
                return (torch.zeros if kind == TensorSupplyType.Zero else torch.ones)(shape, dtype=tdt)
            if d.name == "bool":
                return torch.randint(0, 2, shape).to(tdt)
            if d.name.startswith("float8"):
                return torch.randint(-8, 9, shape).to(torch.float32).to(tdt)
            lo = 0 if d.kind == "uint" else -2
            return torch.randint(lo, 3, shape).to(tdt)
        if kind == TensorSupplyType.Uniform:
            return torch.empty(shape, dtype=torch.float32).uniform_(-1.0, 1.0).to(tdt)
        if kind == TensorSupplyType.Normal:
            return torch.empty(shape, dtype=torch.float32).normal_(-1.0, 1.0).to(tdt)
        if kind == TensorSupplyType.Randn:
            return torch.randn(shape).to(tdt)
        if kind == TensorSupplyType.Zero:
            return torch.zeros(shape, dtype=tdt)
        if kind == TensorSupplyType.One:
            return torch.ones(shape, dtype=tdt)
        raise ValueError(f"unknown TensorSupplyType {supply_type!r}")

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
