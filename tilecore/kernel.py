"""The compiled Kernel: checks call arguments, allocates outputs, runs the backend's artifact."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import call_args, subbyte
from . import dtypes as dt
from .errors import TileCallError, TileError, TileTargetError, caller_loc
from .ir.buffer import Buffer
from .ir.call_checks import check_call
from .ir.expr import Var
from .ir.module import Module, PrimFunc
from .target import Target, TargetDesc

if TYPE_CHECKING:  # annotations only: a compile-cache hit does not import the contract module
    from .contract import Artifact, Diagnostic


def _is_torch(x) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def __getattr__(name: str):
    """`_to_numpy` / `_from_numpy` (in `tilecore.kernel_run`) under their old address."""
    if name in ("_to_numpy", "_from_numpy"):
        from . import kernel_run

        return getattr(kernel_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def normalize_out_idx(func: PrimFunc, out_idx) -> list[int]:
    """`out_idx` as distinct positions in the user's parameter order (tensors and scalar
    parameters), or a TileCallError at the caller's line; `tilecore.compile` calls it before
    building, so a bad out_idx costs no code generation."""
    signature = tuple(func.attr("signature") or func.params)
    n = len(signature)
    if out_idx is None:
        out_idx = []
    elif isinstance(out_idx, int):
        out_idx = [out_idx]
    norm = []
    for i in out_idx:
        if isinstance(i, bool):
            raise TileCallError(f"out_idx entry {i!r} is a bool, not a parameter index",
                                caller_loc(), hint="list parameter positions, e.g. out_idx=[-1]")
        if not isinstance(i, int) or not -n <= i < n:
            raise TileCallError(
                f"out_idx {i!r} is out of range for kernel {func.name} with {n} parameters",
                caller_loc(), hint=f"use indices in [-{n}, {n - 1}]",
            )
        if isinstance(signature[i % n], Var):
            raise TileCallError(f"out_idx {i!r} names the scalar parameter {signature[i].name}; "
                                "outputs are tensors", caller_loc(),
                                hint="list only tensor parameters in out_idx")
        if i % n in norm:
            raise TileCallError(f"out_idx {out_idx!r} names parameter {signature[i].name} twice",
                                caller_loc(), hint="list each output once")
        norm.append(i % n)
    return norm


class Kernel:
    """A PrimFunc compiled for one target; call it like a function on arrays or tensors."""

    def __init__(self, func: PrimFunc, target: Target, out_idx, artifact: Artifact, stages,
                 desc=None, diagnostics: tuple | None = None):
        """`artifact` satisfies `tilecore.contract.Artifact`; `stages` are the pipeline's
        [(stage name, Module)], or a function returning them (a compile-cache hit runs the
        pipeline only when the IR is asked for); `desc` the target description the pipeline ran
        with (a TargetDesc, or a function returning it: a hit describes only when asked);
        `diagnostics` the final stage's, when `stages` is a function."""
        self.func = func
        self.target = target
        self.artifact = artifact
        self._stages = stages
        self._diagnostics = diagnostics
        self._desc = desc
        self._plans: dict = {}  # call signature -> a function running a call (see __call__)
        # The user's parameter order: tensors (Buffers) and scalar parameters (Vars); out_idx
        # counts in it, as TileLang's does. out_idx / in_idx below index func.params (tensors).
        signature = tuple(func.attr("signature") or func.params)
        norm = normalize_out_idx(func, out_idx)
        outs = {id(signature[i]) for i in norm}
        self.out_idx = [i for i, p in enumerate(func.params) if id(p) in outs]
        # T.alloc_global scratch: hidden parameters each call allocates and does not return
        scratch = {id(b) for b in func.attr("scratch", ())}
        self.scratch_idx = [i for i, p in enumerate(func.params) if id(p) in scratch]
        self.in_idx = [i for i in range(len(func.params))
                       if i not in self.out_idx and i not in self.scratch_idx]
        self.inputs = [p for p in signature if id(p) not in outs]  # what a call passes, in order
        self._written = call_args.written_params(func)  # inputs never written are never copied back
        # outputs the kernel accumulates into (or reads) start at zero; the rest are torch.empty
        acc = call_args.accumulated_params(func)
        self._zero_out = frozenset(i for i in self.out_idx if id(func.params[i]) in acc)
        self._runnable = None

    # --------------------------------------------------------------------- introspection
    def get_kernel_source(self) -> str:
        """The code the backend generated (CUDA C++, Python for numba, tile source for interp)."""
        return self.artifact.source

    def get_ir(self, stage: str = "final") -> str:
        """The IR after pipeline stage `stage` ('input', a pass name, or 'final'), preceded by the
        stage's diagnostics as `#` comments."""
        from .passes.pipeline import render  # the printer: not needed to load or run a kernel

        if stage == "final":
            return render(self.stages[-1][1])
        for name, mod in self.stages:
            if name == stage:
                return render(mod)
        raise TileError(f"no stage {stage!r}", caller_loc(),
                        hint=f"stages: final, {', '.join(n for n, _ in self.stages)}")

    @property
    def desc(self) -> TargetDesc | None:
        """The TargetDesc the pipeline ran (or, after a compile-cache hit, would run) with."""
        if callable(self._desc):
            self._desc = self._desc()
        return self._desc

    @property
    def stages(self) -> list[tuple[str, Module]]:
        """The pipeline's [(stage name, Module)], 'input' first (run now on a cache hit)."""
        if callable(self._stages):
            self._stages = self._stages()
        return self._stages

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
        if callable(self._stages) and self._diagnostics is not None:
            return tuple(self._diagnostics)
        return self.stages[-1][1].attrs.diagnostics

    def get_profiler(self, tensor_supply_type: str = "auto"):
        """A `tilecore.profiler.Profiler` for this kernel: do_bench, assert_allclose."""
        from .profiler import get_profiler

        return get_profiler(self, tensor_supply_type)

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
                                    caller_loc(), hint="pass a NumPy array or a torch tensor")
            shape = tuple(int(s) for s in shape)
            shape, dtype = subbyte.logical(shape, dtype, pos, p)  # packed sub-byte: (..., K // 2)
            if len(shape) != len(p.shape):
                raise TileCallError(
                    f"argument {pos} ({p.name}) has shape {shape}, kernel expects rank {len(p.shape)} "
                    f"shape {self._fmt(p)}", caller_loc(), hint="reshape the argument")
            for want, got in zip(p.shape, shape):
                if isinstance(want, Var):
                    prev = dyn.get(id(want))
                    if prev is not None and prev[1] != got:
                        raise TileCallError(
                            f"symbolic dimension {want.name} is {prev[1]} elsewhere but {got} in "
                            f"argument {pos} ({p.name})", caller_loc(),
                            hint=f"every dimension named {want.name} must have one size")
                    dyn[id(want)] = (want.name, got)
                elif want != got:
                    raise TileCallError(
                        f"argument {pos} ({p.name}) has shape {shape}, kernel expects {self._fmt(p)}",
                        caller_loc(), hint="pass a tensor of the annotated shape, or annotate the "
                        "dimension with T.dynamic")
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
                        caller_loc(), hint=f"pass the output as an argument, or give {s.name} to an "
                        "input's shape too")
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
                                caller_loc(), hint=f"declare it wider (`{p.name}: T.int64`) or pass a "
                                "smaller value")
        return v

    @staticmethod
    def _fmt(p: Buffer) -> str:
        return "(" + ", ".join(s.name if isinstance(s, Var) else str(s) for s in p.shape) + ")"

    def _out_shape(self, p: Buffer, dyn: dict) -> tuple:
        return tuple(dyn[s.name] if isinstance(s, Var) else s for s in p.shape)

    def __call__(self, *args, **kwargs):
        """Run on `args` (the inputs, in the user's parameter order, or by name); returns the
        outputs.

        The first call with a given signature (each tensor's type, shape, dtype, device and
        contiguity; each scalar's value) checks the arguments and builds a *plan*: the output
        shapes, and for artifacts with a `launcher` the prepared launch; later calls with that
        signature run the plan directly (the checks it needs are implied by the signature)."""
        if kwargs:
            args = call_args.bind_keywords(self.func.name, self.inputs, args, kwargs, caller_loc)
        key = _signature(args)
        plan = self._plans.get(key) if key is not None else None
        if plan is None:
            plan = self._plan(args)
            if key is not None:
                if len(self._plans) >= 64:  # many scalar values: keep the table small
                    self._plans.clear()
                self._plans[key] = plan
        return plan(args)

    def _plan(self, args):
        """Check `args` and return a function running a call with their signature."""
        # autograd tensors are detached (kernels are not differentiable) on every call of the plan
        detach = [j for j, a in enumerate(args) if _is_torch(a) and a.requires_grad]
        args = [a.detach() if j in detach else a for j, a in enumerate(args)]
        dyn = self._check(args)
        check_call(self.func, dyn, caller_loc)
        written = self._written
        tensors = [call_args.check_tensor(pos, p, a, id(p) in written, caller_loc)
                   for pos, (p, a) in enumerate(zip(self.inputs, args)) if not isinstance(p, Var)]
        if self._runnable is None and self.artifact.array_api == "torch":  # a device target
            call_args.check_runnable(self.target, caller_loc)
            self._runnable = True
        use_torch = any(_is_torch(a) for a in tensors) or (not tensors and self.artifact.array_api == "torch")
        device = next((a.device for a in tensors if _is_torch(a)), None)
        tensor_pos = [j for j, p in enumerate(self.inputs) if not isinstance(p, Var)]
        n = len(self.func.params)
        in_map = list(zip(self.in_idx, tensor_pos))
        out_idx = self.out_idx
        if use_torch:
            import torch

            dev = device if device is not None else torch.device("cuda")
            outs = [(i, self._out_shape(self.func.params[i], dyn),
                     dt.torch_dtype(self.func.params[i].dtype)) for i in out_idx]
            empty, zero_out = torch.empty, self._zero_out

            def alloc(i, shape, dtype):
                return (torch.zeros if i in zero_out else empty)(shape, dtype=dtype, device=dev)

            def zeros(shape, dtype):
                return torch.zeros(shape, dtype=dtype, device=dev)
            scratch = [(i, self._out_shape(self.func.params[i], dyn),
                        dt.torch_dtype(self.func.params[i].dtype)) for i in self.scratch_idx]
        else:
            outs = [(i, self._out_shape(self.func.params[i], dyn), self.func.params[i].dtype.np)
                    for i in out_idx]

            # NumPy outputs start at zero (parts a kernel leaves unwritten read as 0, which
            # callers rely on); torch outputs are torch.empty, as torch's own operators allocate
            def alloc(i, shape, dtype):
                return np.zeros(shape, dtype=dtype)
            zeros = np.zeros
            scratch = [(i, self._out_shape(self.func.params[i], dyn), self.func.params[i].dtype.np)
                       for i in self.scratch_idx]
        launcher = getattr(self.artifact, "launcher", None)
        direct = (launcher is not None and self.artifact.array_api == "torch" and use_torch
                  and all(_is_torch(a) and a.is_contiguous() and a.device == dev for a in tensors))
        launch = launcher(dyn, dev) if direct else None
        single = len(outs) == 1
        # the common layout (tensor inputs first, in order, outputs after them, no scalars):
        # the parameter list is the arguments plus the new outputs
        plain = (len(tensor_pos) == len(args) and [i for i, _ in in_map] == list(range(len(args)))
                 and [i for i, _, _ in outs] == list(range(len(args), n)))
        if plain and launch is not None and single and not self._zero_out:
            (_, shape1, dtype1), = outs
            # an input of the output's shape and dtype (contiguous: the signature says so)
            # makes the allocation torch.empty_like, the cheapest call torch has
            like = next((j for j, (a, p) in enumerate(zip(args, self.inputs))
                         if tuple(a.shape) == tuple(shape1) and a.dtype == dtype1), None)
            if like is not None:
                empty_like = torch.empty_like

                def plan_one(args):
                    out = empty_like(args[like])
                    launch((*args, out))
                    return out
            else:
                def plan_one(args):
                    out = alloc(0, shape1, dtype1)
                    launch((*args, out))
                    return out

            return _detaching(plan_one, detach)

        def plan(args):
            full = [None] * n
            for i, j in in_map:
                full[i] = args[j]
            for i, shape, dtype in outs:
                full[i] = alloc(i, shape, dtype)
            for i, shape, dtype in scratch:  # T.alloc_global: zeroed, used by this call only
                full[i] = zeros(shape, dtype)
            if launch is not None:
                launch(full)
            else:
                self._run(full, dyn)
            if not outs:
                return None
            return full[outs[0][0]] if single else [full[i] for i, _, _ in outs]

        return _detaching(plan, detach)

    def _run(self, full: list, dyn: dict) -> None:
        """The general path (no prepared launch): arguments converted to the artifact's array
        API and written ones copied back (`tilecore.kernel_run`, imported on first use)."""
        from .kernel_run import run_converted

        run_converted(self.artifact, self.func.params, self._written, full, dyn)

    def __repr__(self) -> str:
        return f"<tilecore.Kernel {self.func.name} target={self.target}>"


_tensor_types: set = set()  # torch.Tensor (and subclasses seen), once torch is in use


def _detaching(plan, detach: list):
    """`plan` called with the autograd tensors at positions `detach` detached."""
    if not detach:
        return plan

    def run(args):
        return plan([a.detach() if j in detach else a for j, a in enumerate(args)])

    return run


def _signature(args) -> tuple | None:
    """What a call's checks and plan depend on, hashable; None when an argument is of a kind
    with no cheap signature (the call then takes the checked path every time). Flat: a tensor
    adds (type, shape, dtype, device, contiguous, requires_grad), an int its value (a shape never equals an
    int, so the flattening is unambiguous)."""
    out: list = []
    for a in args:
        t = type(a)
        if t in _tensor_types:
            out += (t, a.shape, a.dtype, a.device, a.is_contiguous(), a.requires_grad)
        elif t is int:
            out.append(a)
        elif t is np.ndarray:
            out += (t, a.shape, a.dtype.str, a.flags.c_contiguous, a.flags.writeable)
        elif hasattr(a, "data_ptr") and t.__module__.startswith("torch"):
            _tensor_types.add(t)
            out += (t, a.shape, a.dtype, a.device, a.is_contiguous(), a.requires_grad)
        else:
            return None
    return tuple(out)
