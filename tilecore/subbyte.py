"""Sub-byte integer tensors (TileLang's `T.int4`): where they run and how hosts pass them.

- Semantics: int4 holds -8..7; a conversion to it wraps (keeps the low 4 bits, C-style, like
  every tilecore integer); arithmetic on int4 values computes in `int` (int32), as C promotes.
  `T.gemm` of int4 operands accumulates into int32.
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


def _subbyte_buffers(func) -> list:
    seen, out = set(), []
    for n in list(func.params) + list(walk(func.body)):
        if isinstance(n, Buffer) and n.dtype in dt.SUB_BYTE and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
    return out


def check_kernel(func, target, out_idx) -> None:
    """Before compiling: a TileTargetError when `func` holds an int4 buffer and `target` cannot
    run it, a TileTypeError when it writes or returns an int4 global tensor."""
    bufs = _subbyte_buffers(func)
    if not bufs:
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
            f"target {target} does not run sub-byte integers: {b.name} is {b.dtype}", func.loc,
            hint="run int4 kernels on interp or emu:<arch>, or store the values as int8")


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
    return str(dtype) in ("int8", "uint8", "torch.int8", "torch.uint8")


def unpack(a, d: dt.DType) -> np.ndarray:
    """The one-value-per-byte storage of packed argument `a` (NumPy array or torch tensor)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().numpy()
    b = np.ascontiguousarray(a).view(np.uint8)
    lo = (b & 0xF).astype(np.int8)
    hi = (b >> 4).astype(np.int8)
    out = np.stack([lo, hi], axis=-1).reshape(b.shape[:-1] + (b.shape[-1] * 2,))
    out = np.where(out >= 8, out - 16, out)  # int4: sign-extend the nibble
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
