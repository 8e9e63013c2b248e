"""`tilecore.torch`: tilecore kernels as `torch.library` custom ops, and DLPack interop.

`custom_op(func, out_idx=..., target=...)` takes `tilecore.jit`'s arguments, compiles `func`
(a `@T.prim_func`) and registers it as the custom op `tilecore::<name>` with a schema derived
from the kernel's signature (tensors as `Tensor`, scalar parameters as `int`) and a fake
(meta) implementation that allocates each output with the shape its signature gives
(symbolic dimensions taken from the inputs' shapes), the output dtype and the first input's
device. `torch.compile(fullgraph=True)` then traces through the op without a graph break; the
real implementation runs the Kernel. Without `out_idx` the op mutates its tensor arguments
(declared `Tensor(a!)` in the schema) and returns nothing.

This module imports torch; `import tilecore` does not import it (`tilecore.torch` is loaded
on first attribute access).
"""

from __future__ import annotations

import hashlib
import inspect
import re

import torch

from . import dtypes as dt
from .compiler import compile as tc_compile
from .errors import TileError, caller_loc
from .ir.expr import Var
from .ir.module import PrimFunc
from .ir.printer import print_func

_REGISTERED: dict[str, object] = {}


def _ident(name: str) -> str:
    """A schema-safe argument name (schemas forbid a few Python-legal spellings)."""
    s = re.sub(r"\W", "_", name)
    return s if s not in ("self", "out", "Tensor", "int", "float") else f"{s}_"


def _fake(kernel):
    """The meta implementation: outputs of the signature's shapes on the inputs' device."""
    params = kernel.func.params

    def fake(*args):
        sizes: dict[str, object] = {}
        tensors = []
        for p, a in zip(kernel.inputs, args):
            if isinstance(p, Var):
                sizes[p.name] = a
                continue
            tensors.append(a)
            for want, got in zip(p.shape, a.shape):
                if isinstance(want, Var):
                    sizes.setdefault(want.name, got)
        device = tensors[0].device if tensors else None
        outs = []
        for i in kernel.out_idx:
            p = params[i]
            shape = [sizes[s.name] if isinstance(s, Var) else s for s in p.shape]
            outs.append(torch.empty(shape, dtype=dt.torch_dtype(p.dtype), device=device))
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    return fake


def _impl(kernel):
    """The real implementation: run the Kernel (outputs come back as fresh torch tensors). It
    carries the kernel's signature (tensors as torch.Tensor, scalars as int, the outputs as the
    return annotation), from which torch infers the op's schema."""

    def impl(*args):
        out = kernel(*args)
        if isinstance(out, list):
            return tuple(out)
        return out

    params = [inspect.Parameter(_ident(p.name), inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=int if isinstance(p, Var) else torch.Tensor)
              for p in kernel.inputs]
    n_out = len(kernel.out_idx)
    ret = None if n_out == 0 else torch.Tensor if n_out == 1 else tuple[(torch.Tensor,) * n_out]
    impl.__signature__ = inspect.Signature(params, return_annotation=ret)
    return impl


def custom_op(func, out_idx=None, target="auto", pass_configs=None, name: str | None = None):
    """Compile `func` (a `@T.prim_func`) like `tilecore.jit(func, out_idx, target,
    pass_configs)` and register it as the torch custom op `tilecore::<name>` (default: the
    kernel's name and a hash of its IR and target). Returns the op (callable like the Kernel;
    `.kernel` is the compiled Kernel). Registering the same kernel twice returns the same op."""
    if not isinstance(func, PrimFunc):
        raise TileError(f"tilecore.torch.custom_op needs a @T.prim_func kernel, got "
                        f"{type(func).__name__}", caller_loc(),
                        hint="build the PrimFunc first: custom_op(factory(M, N), out_idx=[-1])")
    kernel = tc_compile(func, out_idx, target, pass_configs)
    digest = hashlib.sha256((print_func(func) + str(kernel.target) + repr(kernel.out_idx)
                             + repr(sorted((pass_configs or {}).items()))).encode()).hexdigest()[:10]
    op_name = name or f"{_ident(func.name)}_{digest}"
    if not re.fullmatch(r"[A-Za-z_]\w*", op_name):
        raise TileError(f"custom op name {op_name!r} is not an identifier", caller_loc(),
                        hint="pass name= made of letters, digits and _ (not starting with a digit)")
    qual = f"tilecore::{op_name}"
    if qual in _REGISTERED:
        return _REGISTERED[qual]
    mutates = not kernel.out_idx
    mutated = tuple(_ident(p.name) for p in kernel.inputs if not isinstance(p, Var)) if mutates else ()
    # the schema is inferred from the implementation's signature, as torch recommends (an
    # explicit schema= string was misparsed by torch 2.11 on the H200)
    op = torch.library.custom_op(qual, _impl(kernel), mutates_args=mutated)
    op.register_fake(_fake(kernel))
    op.kernel = kernel
    _REGISTERED[qual] = op
    return op


# --------------------------------------------------------------------------- DLPack


def from_dlpack(x) -> torch.Tensor:
    """A torch tensor sharing memory with any DLPack producer (JAX, CuPy, NumPy arrays)."""
    return torch.from_dlpack(x)


def to_dlpack(t: torch.Tensor):
    """A DLPack capsule of a torch tensor, for `jax.dlpack.from_dlpack` / `cupy.from_dlpack`."""
    return torch.utils.dlpack.to_dlpack(t)


def call_dlpack(kernel, *args):
    """Run `kernel` on DLPack arrays (JAX, CuPy, ...): each array with `__dlpack__` is viewed
    as a torch tensor without a copy, the outputs come back as torch tensors (pass them to the
    other library's `from_dlpack`)."""
    conv = [torch.from_dlpack(a) if hasattr(a, "__dlpack__") and not isinstance(a, torch.Tensor)
            else a for a in args]
    return kernel(*conv)
