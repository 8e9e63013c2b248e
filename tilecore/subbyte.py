"""Sub-byte tensors (TileLang's `T.int4`, `T.float4_e2m1fn`): where they run, how hosts pass them.

- Semantics: int4 holds -8..7; a conversion to it wraps (keeps the low 4 bits, C-style, like
  every tilecore integer); arithmetic on int4 values computes in `int` (int32), as C promotes.
  `T.gemm` of int4 operands accumulates into int32. float4_e2m1fn (tilecore.dtypes) computes
  in float32 like the other narrow floats; a conversion to it rounds to nearest even and
  saturates to +-6. The same storage and host rules below hold for it: a packed host tensor's
  nibble is the FP4 code (a torch.float4_e2m1fn_x2 tensor is accepted as packed pairs too).
- Kernel storage: one value per byte (ml_dtypes.int4) on the targets that declare
  `TargetInfo.sub_byte` (`interp` and `emu:*`). Other targets (cpu, cuda, hip, metal, tvm) refuse
  a kernel holding an int4 buffer with a TileTargetError naming the target (`check_kernel`).
- Host tensors: as in TileLang, an int4 tensor of logical shape (..., K) is passed packed, two
  values per byte, as an int8 or uint8 array / tensor of shape (..., K // 2): element 2j in the
  low nibble, 2j + 1 in the high one. A NumPy array of dtype ml_dtypes.int4 of the logical shape
  is accepted too. int4 tensors are kernel inputs: a kernel writing an int4 global tensor (or
  returning one through out_idx) is refused when compiled.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .errors import TileCallError, TileTargetError, TileTypeError, caller_loc
from .ir.buffer import Buffer
from .ir.visit import walk


def _subbyte_nodes(func) -> tuple[list, object]:
    """(the sub-byte buffers of `func`, its first sub-byte value or None), in one walk."""
    from .ir.expr import Expr

    seen, out, value = set(), [], None
    for n in list(func.params) + list(walk(func.body)):
        if isinstance(n, Buffer) and n.dtype in dt.SUB_BYTE and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
        elif value is None and isinstance(n, Expr) and getattr(n, "dtype", None) in dt.SUB_BYTE:
            value = n
    return out, value


def check_kernel(func, target, out_idx) -> None:
    """Before compiling: a TileTargetError when `func` holds an int4 buffer and `target` cannot
    run it, a TileTypeError when it writes or returns an int4 global tensor."""
    bufs, value = _subbyte_nodes(func)
    if not bufs:
        if value is not None:
            _check_value(func, target, value)
        return
    from .call_args import written_params
    from .kernel import normalize_out_idx

    signature = tuple(func.attr("signature") or func.params)
    outs = {id(signature[i]) for i in normalize_out_idx(func, out_idx)}
    check_inputs_only(func, written_params(func), [i for i, p in enumerate(func.params)
                                                   if id(p) in outs])
    from .plugins import target_infos

    info = target_infos().get(target.kind)
    if info is None or not info.sub_byte:  # the target declares it (TargetInfo.sub_byte)
        b = bufs[0]
        raise TileTargetError(
            f"target {target} does not run sub-byte types: {b.name} is {b.dtype}", func.loc,
            hint=f"run {b.dtype} kernels on interp or emu:<arch>, or store the values as "
                 + ("int8" if b.dtype.is_int else "uint8 codes and decode them with "
                    "T.reinterpret(code, T.float4_e2m1fn)"))


def _check_value(func, target, value) -> None:
    """A kernel with no sub-byte buffer may still compute a sub-byte value (`T.cast(x,
    T.float4_e2m1fn)` then `T.reinterpret(..., T.uint8)`): refused where sub-byte types do not
    run, as their buffers are."""
    from .plugins import target_infos

    info = target_infos().get(target.kind)
    if info is None or not info.sub_byte:
        raise TileTargetError(
            f"target {target} does not run sub-byte types: {func.name} computes a "
            f"{value.dtype} value", func.loc,
            hint="run it on interp or emu:<arch>; on other targets round through an 8-bit "
                 "or wider type")


def check_inputs_only(func, written: frozenset, out_idx) -> None:
    """int4 global tensors are inputs: refuse a kernel writing one or returning one."""
    for i, p in enumerate(func.params):
        if isinstance(p, Buffer) and p.dtype in dt.SUB_BYTE and (id(p) in written or i in out_idx):
            raise TileTypeError(
                f"kernel {func.name} writes the {p.dtype} tensor {p.name}; {p.dtype} global "
                "tensors are inputs only", func.loc,
                hint="write the results as int8 (or pack them yourself into an int8 tensor)")


def _is_packed(a) -> bool:
    return _is_packed_dtype(getattr(a, "dtype", ""))


def logical(shape: tuple, dtype, pos: int, p: Buffer) -> tuple:
    """(shape, dtype) an argument of int4 parameter `p` stands for: a packed int8 / uint8
    argument holds twice its last dimension."""
    if p.dtype not in dt.SUB_BYTE or not _is_packed_dtype(dtype):
        return shape, dtype
    if not shape:
        raise TileCallError(f"argument {pos} ({p.name}) is a 0-d packed {p.dtype} tensor",
                            caller_loc(), hint="pass shape (..., K // 2) for a (..., K) tensor")
    return shape[:-1] + (shape[-1] * 2,), p.dtype


def _is_packed_dtype(dtype) -> bool:
    return str(dtype) in ("int8", "uint8", "torch.int8", "torch.uint8", "torch.float4_e2m1fn_x2")


def unpack(a, d: dt.DType) -> np.ndarray:
    """The one-value-per-byte storage of packed argument `a` (NumPy array or torch tensor)."""
    if hasattr(a, "detach"):
        import torch

        a = a.detach().cpu().contiguous().view(torch.uint8).numpy()  # float4_e2m1fn_x2 too
    b = np.ascontiguousarray(a).view(np.uint8)
    lo = b & 0xF
    hi = b >> 4
    out = np.stack([lo, hi], axis=-1).reshape(b.shape[:-1] + (b.shape[-1] * 2,))
    if d.is_float:  # float4_e2m1fn: the nibble is the code; ml_dtypes keeps it in the low bits
        return np.ascontiguousarray(out).view(d.np)
    out = np.where(out >= 8, out.astype(np.int8) - 16, out.astype(np.int8))  # int4: sign-extend
    return out.astype(np.int64).astype(d.np)


def storage_args(params, args: list) -> list:
    """`args` with each packed argument of an int4 parameter unpacked (numpy-API targets)."""
    out = []
    for p, a in zip(params, args):
        if isinstance(p, Buffer) and p.dtype in dt.SUB_BYTE and _is_packed(a):
            out.append(unpack(a, p.dtype))
        else:
            out.append(a)
    return out


__all__ = ["check_inputs_only", "check_kernel", "logical", "storage_args",
           "unpack"]
