"""The tensors users really pass a Kernel: keyword calls, autograd tensors, meta tensors,
broadcast views and read-only arrays, each accepted or refused with a TileCallError.

Which parameters a kernel writes is read from its tile IR once (`written_params`): an input it
only reads is never copied back after the run (a broadcast view could not take the copy, and a
copy back would be wasted work), and one it writes must be writable memory.
"""

from __future__ import annotations

from .errors import TileCallError
from .ir.buffer import Buffer, Region
from .ir.expr import Load
from .ir.module import PrimFunc
from .ir.stmt import AtomicAdd, AtomicAddRegion, Copy, CumSum, Fill, Gemm, Reduce, Store
from .ir.visit import walk


def written_params(func: PrimFunc) -> frozenset:
    """ids of the parameters (global buffers) the kernel body may write."""
    out = set()
    for n in walk(func.body):
        if isinstance(n, (Store, AtomicAdd)):
            out.add(id(n.buffer))
        elif isinstance(n, (Copy, Fill, AtomicAddRegion)):
            out.add(id(n.dst.buffer))
        elif isinstance(n, Gemm) and isinstance(n.c, Region):
            out.add(id(n.c.buffer))
        elif isinstance(n, (Reduce, CumSum)) and isinstance(n.dst, Buffer):
            out.add(id(n.dst))
    return frozenset(out)


def accumulated_params(func: PrimFunc) -> frozenset:
    """ids of the parameters whose old contents the kernel may see: targets of atomic adds and
    buffers it reads. An output among them starts at zero (a dQ accumulated with atomics); the
    others are allocated uninitialized (torch.empty), since every element is written."""
    out = set()
    for n in walk(func.body):
        if isinstance(n, AtomicAdd) or isinstance(n, Load):
            out.add(id(n.buffer))
        elif isinstance(n, AtomicAddRegion):
            out.add(id(n.dst.buffer))
        elif isinstance(n, Copy):
            out.add(id(n.src.buffer))
    return frozenset(out)


def bind_keywords(name: str, inputs: list, args: tuple, kwargs: dict, where) -> tuple:
    """Positional and keyword arguments as one positional tuple in `inputs` order."""
    if not kwargs:
        return args
    names = [p.name for p in inputs]
    full = list(args) + [None] * (len(names) - len(args))
    given = [True] * len(args) + [False] * (len(names) - len(args))
    for k, v in kwargs.items():
        if k not in names:
            raise TileCallError(f"kernel {name} has no input named {k!r}", where(),
                                hint=f"its inputs are {', '.join(names)} (outputs in out_idx are "
                                "returned, not passed)")
        i = names.index(k)
        if i < len(given) and given[i]:
            raise TileCallError(f"kernel {name} got {k!r} twice (by position and by name)", where(),
                                hint="pass each input once")
        full[i], given[i] = v, True
    missing = [n for n, g in zip(names, given) if not g]
    if missing:
        raise TileCallError(f"kernel {name} is missing input {missing[0]!r}", where(),
                            hint=f"its inputs are {', '.join(names)}")
    return tuple(full)


def check_tensor(pos: int, p: Buffer, a, written: bool, where):
    """`a` made ready to pass for parameter `p`: an autograd tensor detached; a meta tensor, or
    a broadcast view / read-only array the kernel would write, refused."""
    if type(a).__module__.startswith("torch") and hasattr(a, "data_ptr"):
        if a.device.type == "meta":
            raise TileCallError(f"argument {pos} ({p.name}) is a meta tensor, which has no data",
                                where(), hint="pass a tensor on a real device")
        if a.requires_grad:
            a = a.detach()  # kernels are not differentiable; read (or write) its data as is
        if written and any(st == 0 and n > 1 for st, n in zip(a.stride(), a.shape)):
            raise TileCallError(
                f"argument {pos} ({p.name}) is a broadcast (expanded) view, and the kernel writes "
                f"{p.name}: several elements share one memory location", where(),
                hint="pass a real tensor: x.contiguous() (or x.clone())")
        return a
    flags = getattr(a, "flags", None)
    if written and flags is not None and not flags.writeable:
        raise TileCallError(f"argument {pos} ({p.name}) is a read-only array, and the kernel "
                            f"writes {p.name}", where(), hint="pass a writable copy: x.copy()")
    strides = getattr(a, "strides", None)
    if written and strides is not None and any(st == 0 and n > 1 for st, n in zip(strides, a.shape)):
        raise TileCallError(
            f"argument {pos} ({p.name}) is a broadcast view, and the kernel writes {p.name}",
            where(), hint="pass a real array: np.ascontiguousarray(x)")
    return a


def check_runnable(target, where) -> None:
    """A TileTargetError when `target` cannot run on this machine (a cuda kernel without a GPU),
    with the backend's reason, instead of whatever the device runtime would raise."""
    from . import plugins
    from .errors import TileTargetError

    info = plugins.target_infos().get(target.kind)
    if info is None:
        return
    ok, reason = info.runnable()
    if not ok:
        emulated = f"emu:{target.kind}:{target.arch}" if target.arch else f"emu:{target.kind}"
        there = (f"execute its lowering here with target='{emulated}'"
                 if "emu" in plugins.target_infos() else
                 "run it on a runnable target (`python -m tilecore targets`)")
        raise TileTargetError(f"target {target} is not runnable here: {reason}", where(),
                              hint=f"read its source (kernel.get_kernel_source()), or {there}")
