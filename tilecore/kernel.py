"""The compiled Kernel: checks call arguments, allocates outputs, runs the backend's artifact."""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .contract import Artifact, Diagnostic
from .errors import TileCallError, TileError, TileTargetError, caller_loc
from .ir.buffer import Buffer
from .ir.expr import Var
from .ir.module import Module, PrimFunc
from .passes.pipeline import render
from .target import Target, TargetDesc


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _to_numpy(t) -> np.ndarray:
    """A NumPy view of a torch CPU tensor, narrow floats included (viewed through ints)."""
    import torch

    if t.device.type != "cpu":
        t = t.cpu()
    d = dt.as_dtype(t.dtype)
    if d.name in ("bfloat16",):
        return t.view(torch.int16).numpy().view(d.np)
    if d.name.startswith("float8"):
        return t.view(torch.uint8).numpy().view(d.np)
    return t.numpy()


def _from_numpy(a: np.ndarray):
    """A torch CPU tensor sharing `a`'s memory, narrow floats included (viewed through ints)."""
    import torch

    d = dt.from_numpy(a.dtype)
    if d.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if d.name.startswith("float8"):
        return torch.from_numpy(a.view(np.uint8)).view(dt.torch_dtype(d))
    return torch.from_numpy(a)


class Kernel:
    """A PrimFunc compiled for one target; call it like a function on arrays or tensors."""

    def __init__(self, func: PrimFunc, target: Target, out_idx, artifact: Artifact, stages,
                 desc: TargetDesc | None = None):
        """`artifact` satisfies `tilecore.contract.Artifact`; `stages` are the pipeline's
        [(stage name, Module)]; `desc` the target description the pipeline ran with."""
        self.func = func
        self.target = target
        self.artifact = artifact
        self.stages: list[tuple[str, Module]] = stages
        self.desc = desc
        # The user's parameter order: tensors (Buffers) and scalar parameters (Vars); out_idx
        # counts in it, as TileLang's does. out_idx / in_idx below index func.params (tensors).
        signature = tuple(func.attr("signature") or func.params)
        n = len(signature)
        if out_idx is None:
            out_idx = []
        elif isinstance(out_idx, int):
            out_idx = [out_idx]
        norm = []
        for i in out_idx:
            if not isinstance(i, int) or not -n <= i < n:
                raise TileCallError(
                    f"out_idx {i!r} is out of range for kernel {func.name} with {n} parameters",
                    caller_loc(), hint=f"use indices in [-{n}, {n - 1}]",
                )
            if isinstance(signature[i % n], Var):
                raise TileCallError(f"out_idx {i!r} names the scalar parameter {signature[i].name}; "
                                    "outputs are tensors", caller_loc())
            norm.append(i % n)
        outs = {id(signature[i]) for i in norm}
        self.out_idx = [i for i, p in enumerate(func.params) if id(p) in outs]
        self.in_idx = [i for i in range(len(func.params)) if i not in self.out_idx]
        self.inputs = [p for p in signature if id(p) not in outs]  # what a call passes, in order

    # --------------------------------------------------------------------- introspection
    def get_kernel_source(self) -> str:
        """The code the backend generated (CUDA C++, Python for numba, tile source for interp)."""
        return self.artifact.source

    def get_ir(self, stage: str = "final") -> str:
        """The IR after pipeline stage `stage` ('input', a pass name, or 'final'), preceded by the
        stage's diagnostics as `#` comments."""
        if stage == "final":
            return render(self.stages[-1][1])
        for name, mod in self.stages:
            if name == stage:
                return render(mod)
        raise TileError(f"no stage {stage!r}; stages: {', '.join(n for n, _ in self.stages)}")

    def to_tvm(self):
        """The kernel as a `tvm.IRModule` (one TIR PrimFunc named like the kernel) that a TVM
        user can compose and build; only kernels compiled for a `tvm:*` target have one (the
        artifact's `to_tvm`, from the `tilecore-tvm` backend)."""
        export = getattr(self.artifact, "to_tvm", None)
        if export is None:
            raise TileTargetError(f"kernel {self.func.name} was compiled for {self.target}, which "
                                  "has no TVM form", hint="compile it with target='tvm:llvm' "
                                  "(or another tvm:* target; pip install -e backends/tvm)")
        return export()

    @property
    def stage_names(self) -> list[str]:
        """The pipeline's stage names, 'input' first."""
        return [n for n, _ in self.stages]

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """Notes the compiler made about this kernel (e.g. why a gemm runs without tensor cores);
        also printed at the top of `get_ir()`."""
        return self.stages[-1][1].attrs.diagnostics

    # --------------------------------------------------------------------- calling
    def _check(self, args) -> dict:
        params = self.func.params
        if len(args) != len(self.inputs):
            names = ", ".join(p.name for p in self.inputs)
            raise TileCallError(
                f"kernel {self.func.name} takes {len(self.inputs)} input(s) ({names}), got {len(args)}",
                caller_loc(),
                hint="outputs listed in out_idx are allocated and returned, do not pass them",
            )
        dyn: dict[int, tuple[str, int]] = {}
        for pos, (p, a) in enumerate(zip(self.inputs, args)):
            if isinstance(p, Var):
                dyn[id(p)] = (p.name, self._scalar(pos, p, a))
                continue
            shape = getattr(a, "shape", None)
            dtype = getattr(a, "dtype", None)
            if shape is None or dtype is None:
                raise TileCallError(f"argument {pos} ({p.name}) is a {type(a).__name__}, not an array",
                                    caller_loc())
            shape = tuple(int(s) for s in shape)
            if len(shape) != len(p.shape):
                raise TileCallError(
                    f"argument {pos} ({p.name}) has shape {shape}, kernel expects rank {len(p.shape)} "
                    f"shape {self._fmt(p)}", caller_loc())
            for want, got in zip(p.shape, shape):
                if isinstance(want, Var):
                    prev = dyn.get(id(want))
                    if prev is not None and prev[1] != got:
                        raise TileCallError(
                            f"symbolic dimension {want.name} is {prev[1]} elsewhere but {got} in "
                            f"argument {pos} ({p.name})", caller_loc())
                    dyn[id(want)] = (want.name, got)
                elif want != got:
                    raise TileCallError(
                        f"argument {pos} ({p.name}) has shape {shape}, kernel expects {self._fmt(p)}",
                        caller_loc())
            try:
                got_dt = dt.as_dtype(dtype)
            except TileError:
                got_dt = None
            if got_dt != p.dtype:
                raise TileCallError(
                    f"argument {pos} ({p.name}) has dtype {dtype}, kernel expects {p.dtype}",
                    caller_loc(), hint=f"convert it first, e.g. x.astype({p.dtype.np.name!r})")
        for p in params:
            for s in p.shape:
                if isinstance(s, Var) and id(s) not in dyn:
                    raise TileCallError(
                        f"symbolic dimension {s.name} appears only in outputs; it cannot be inferred",
                        caller_loc())
        return {name: v for name, v in dyn.values()}

    @staticmethod
    def _scalar(pos: int, p: Var, a) -> int:
        """A scalar parameter's argument: a Python (or NumPy) integer in `p.dtype`'s range."""
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise TileCallError(
                f"argument {pos} ({p.name}) is a {type(a).__name__}; the kernel declares it "
                f"`{p.name}: T.{p.dtype.name}`, a scalar", caller_loc(), hint="pass a Python int")
        v = int(a)
        if not dt.min_value(p.dtype) <= v <= dt.max_value(p.dtype):
            raise TileCallError(f"argument {pos} ({p.name}) = {v} does not fit in {p.dtype}",
                                caller_loc())
        return v

    @staticmethod
    def _fmt(p: Buffer) -> str:
        return "(" + ", ".join(s.name if isinstance(s, Var) else str(s) for s in p.shape) + ")"

    def _out_shape(self, p: Buffer, dyn: dict) -> tuple:
        return tuple(dyn[s.name] if isinstance(s, Var) else s for s in p.shape)

    def __call__(self, *args):
        dyn = self._check(args)
        tensors = [a for p, a in zip(self.inputs, args) if not isinstance(p, Var)]
        use_torch = any(_is_torch(a) for a in tensors) or (not tensors and self.artifact.array_api == "torch")
        device = next((a.device for a in tensors if _is_torch(a)), None)
        full: list = [None] * len(self.func.params)
        for i, a in zip(self.in_idx, tensors):
            full[i] = a
        for i in self.out_idx:
            p = self.func.params[i]
            shape = self._out_shape(p, dyn)
            if use_torch:
                import torch

                full[i] = torch.zeros(shape, dtype=dt.torch_dtype(p.dtype),
                                      device=device if device is not None else "cuda")
            else:
                full[i] = np.zeros(shape, dtype=p.dtype.np)
        self._run(full, dyn)
        outs = [full[i] for i in self.out_idx]
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs

    def _run(self, full: list, dyn: dict) -> None:
        api = self.artifact.array_api
        if api == "numpy":
            conv, back = [], []
            for a in full:
                if _is_torch(a):
                    arr = _to_numpy(a)
                    if a.device.type != "cpu" or not arr.flags.c_contiguous:
                        arr = np.ascontiguousarray(arr)
                        back.append((a, arr))
                    conv.append(arr)
                elif isinstance(a, np.ndarray) and not a.flags.c_contiguous:
                    arr = np.ascontiguousarray(a)
                    back.append((a, arr))
                    conv.append(arr)
                else:
                    conv.append(a)
            self.artifact.run(conv, dyn)
            for orig, arr in back:
                if _is_torch(orig):
                    import torch

                    src = torch.from_numpy(arr.view(np.int16) if arr.dtype == dt.bfloat16.np else arr)
                    if arr.dtype == dt.bfloat16.np:
                        src = src.view(torch.bfloat16)
                    orig.copy_(src.to(orig.device))
                else:
                    orig[...] = arr
            return
        # torch API (device targets): numpy arrays go to the device and come back
        import torch

        conv, back = [], []
        for a in full:
            if isinstance(a, np.ndarray):
                t = _from_numpy(np.ascontiguousarray(a)).to(self.artifact.device)
                back.append((a, t))
                conv.append(t)
            elif _is_torch(a) and not a.is_contiguous():
                t = a.contiguous()
                back.append((a, t))
                conv.append(t)
            else:
                conv.append(a)
        self.artifact.run(conv, dyn)
        for orig, t in back:
            if isinstance(orig, np.ndarray):
                orig[...] = _to_numpy(t)
            else:
                orig.copy_(t)

    def __repr__(self) -> str:
        return f"<tilecore.Kernel {self.func.name} target={self.target}>"
