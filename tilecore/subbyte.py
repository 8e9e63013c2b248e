"""Sub-byte tensors (TileLang's `T.int4`, `uint4`, `T.float4_e2m1fn`): where they run, how
hosts pass them.

- Semantics: int4 holds -8..7, uint4 0..15; a conversion to either wraps (keeps the low 4 bits,
  C-style, like every tilecore integer); arithmetic on their values computes in `int` (int32),
  as C promotes. `T.gemm` of int4 (or of uint4) operands accumulates into int32.
  float4_e2m1fn (tilecore.dtypes) computes in float32 like the other narrow floats; a
  conversion to it rounds to nearest even and saturates to +-6. The same storage and host rules
  below hold for it: a packed host tensor's nibble is the FP4 code (a torch.float4_e2m1fn_x2
  tensor is accepted as packed pairs too).
- Kernel storage: one value per byte on the targets that declare the dtype in
  `TargetInfo.sub_byte` (`interp` and `emu:*` all three, `cpu` the integers). Other targets
  (cuda, hip, metal, tvm) refuse a kernel holding a sub-byte buffer or value with a
  TileTargetError naming the target (`check_kernel`).
- Host tensors: as in TileLang, a sub-byte tensor of logical shape (..., K) is passed packed,
  two values per byte, as an int8 or uint8 array / tensor of shape (..., K // 2): element 2j
  in the low nibble, 2j + 1 in the high one (so K is even: an odd K has no packed form and a
  packed argument for it is refused). A NumPy array of the ml_dtypes dtype (ml_dtypes.int4,
  ml_dtypes.uint4, ml_dtypes.float4_e2m1fn) of the logical shape is accepted too, any K.
  Sub-byte tensors are kernel inputs: a kernel writing one global tensor (or returning one
  through out_idx) is refused when compiled.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .errors import TileCallError, TileTargetError, TileTypeError, caller_loc
from .ir.buffer import Buffer
from .ir.visit import walk


def _subbyte_nodes(func) -> tuple[list, dict]:
    """(the sub-byte buffers of `func`, {dtype: its first value of that sub-byte dtype}), in
    one walk."""
    from .ir.expr import Expr

    seen, out, values = set(), [], {}
    for n in list(func.params) + list(walk(func.body)):
        if isinstance(n, Buffer) and n.dtype in dt.SUB_BYTE and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
        elif isinstance(n, Expr) and getattr(n, "dtype", None) in dt.SUB_BYTE:
            values.setdefault(n.dtype, n)
    return out, values


def _declares(info, d: dt.DType) -> bool:
    declared = info.sub_byte if info is not None else False
    return declared is True or (isinstance(declared, tuple) and d.name in declared)


def runs_on(target, d: dt.DType) -> bool:
    """Whether `target` declares sub-byte dtype `d` (`TargetInfo.sub_byte`: True or names)."""
    from .plugins import target_infos

    return _declares(target_infos().get(target.kind), d)


def _runners(d: dt.DType) -> str:
    """The installed targets that run `d`, for a hint: `interp, cpu or emu:<arch>`."""
    from .plugins import target_infos

    names = sorted((k + (":<arch>" if info.archs or info.default_arch else "")
                    for k, info in target_infos().items()
                    if _declares(info, d)), key=lambda k: (k != "interp", k))
    if not names:
        return "a target that declares it"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _wide(d: dt.DType) -> str:
    """The 8-bit dtype the refusal hints suggest for `d`'s values."""
    return "int8" if d.kind == "int" else "uint8"


def check_kernel(func, target, out_idx) -> None:
    """Before compiling: a TileTargetError when `func` holds a sub-byte buffer or value that
    `target` cannot run, a TileTypeError when it writes or returns a sub-byte global tensor."""
    bufs, values = _subbyte_nodes(func)
    if bufs:
        from .call_args import written_params
        from .kernel import normalize_out_idx

        signature = tuple(func.attr("signature") or func.params)
        outs = {id(signature[i]) for i in normalize_out_idx(func, out_idx)}
        check_inputs_only(func, written_params(func), [i for i, p in enumerate(func.params)
                                                       if id(p) in outs])
    for b in bufs:
        if not runs_on(target, b.dtype):
            raise TileTargetError(
                f"target {target} does not run sub-byte types: {b.name} is {b.dtype}", func.loc,
                hint=f"run {b.dtype} kernels on {_runners(b.dtype)}, or store the values as "
                     + (_wide(b.dtype) if b.dtype.is_int else "uint8 codes and decode them "
                        "with T.reinterpret(code, T.float4_e2m1fn)"))
    for d, value in values.items():
        if not runs_on(target, d):
            _refuse_value(func, target, value)


def _refuse_value(func, target, value) -> None:
    """A kernel with no sub-byte buffer may still compute a sub-byte value (`T.cast(x,
    T.float4_e2m1fn)` then `T.reinterpret(..., T.uint8)`): refused where its type does not
    run, as its buffers are."""
    raise TileTargetError(
        f"target {target} does not run sub-byte types: {func.name} computes a "
        f"{value.dtype} value", func.loc,
        hint=f"run it on {_runners(value.dtype)}; on other targets round through an 8-bit "
             "or wider type")


def check_inputs_only(func, written: frozenset, out_idx) -> None:
    """Sub-byte global tensors are inputs: refuse a kernel writing one or returning one."""
    for i, p in enumerate(func.params):
        if isinstance(p, Buffer) and p.dtype in dt.SUB_BYTE and (id(p) in written or i in out_idx):
            raise TileTypeError(
                f"kernel {func.name} writes the {p.dtype} tensor {p.name}; {p.dtype} global "
                "tensors are inputs only", func.loc,
                hint=f"write the results as {_wide(p.dtype)} (or pack them yourself, two per "
                     f"{_wide(p.dtype)})")


def _is_packed(a) -> bool:
    return _is_packed_dtype(getattr(a, "dtype", ""))


def logical(shape: tuple, dtype, pos: int, p: Buffer) -> tuple:
    """(shape, dtype) an argument of sub-byte parameter `p` stands for: a packed int8 / uint8
    argument holds twice its last dimension, so `p`'s last dimension must be even."""
    if p.dtype not in dt.SUB_BYTE or not _is_packed_dtype(dtype):
        return shape, dtype
    if not shape:
        raise TileCallError(f"argument {pos} ({p.name}) is a 0-d packed {p.dtype} tensor",
                            caller_loc(), hint="pass shape (..., K // 2) for a (..., K) tensor")
    k = p.shape[-1] if p.shape else None
    if isinstance(k, int) and k % 2:
        raise TileCallError(
            f"argument {pos} ({p.name}) is a packed {dtype} tensor, but {p.name}'s last "
            f"dimension is {k}: packed {p.dtype} pairs (element 2j in the low nibble) hold an "
            "even count", caller_loc(),
            hint=f"make the last dimension even (pad it), or pass a NumPy array of dtype "
                 f"ml_dtypes.{p.dtype.name} of the logical shape")
    return shape[:-1] + (shape[-1] * 2,), p.dtype


def _is_packed_dtype(dtype) -> bool:
    return str(dtype) in ("int8", "uint8", "torch.int8", "torch.uint8", "torch.float4_e2m1fn_x2")


def unpack(a, d: dt.DType) -> np.ndarray:
    """The one-value-per-byte storage of packed argument `a` (NumPy array or torch tensor)."""
    if hasattr(a, "detach"):
        import torch

        a = a.detach().cpu().contiguous().view(torch.uint8).numpy()  # float4_e2m1fn_x2 too
    b = np.ascontiguousarray(a).view(np.uint8)
    out = np.stack([b & 0xF, b >> 4], axis=-1).reshape(b.shape[:-1] + (b.shape[-1] * 2,))
    # ml_dtypes keeps each sub-byte value in the low nibble of its byte (int4 with its sign
    # there): the nibbles are already the storage, of every sub-byte dtype
    return out.view(d.np)


def storage_args(params, args: list) -> list:
    """`args` with each packed argument of a sub-byte parameter unpacked (numpy-API targets)."""
    out = []
    for p, a in zip(params, args):
        if isinstance(p, Buffer) and p.dtype in dt.SUB_BYTE and _is_packed(a):
            out.append(unpack(a, p.dtype))
        else:
            out.append(a)
    return out


__all__ = ["check_inputs_only", "check_kernel", "logical", "runs_on", "storage_args",
           "unpack"]
