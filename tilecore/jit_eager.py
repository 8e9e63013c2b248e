"""`@tilecore.jit` on an eager kernel body (`tilecore.language.eager`): its own module, so that
compiling a `@T.prim_func` (and a compile-cache hit) does not import it."""

from __future__ import annotations

import functools
import inspect

from .compiler import _read_values, compile
from .errors import TileCallError, caller_loc
from .ir.module import PrimFunc
from .kernel import Kernel
from .language import eager


class EagerJIT:
    """`@tilecore.jit` on an eager kernel body (see `tilecore.language.eager`): calling it with
    tensors binds each `T.const` from their shapes, compiles once per distinct binding and
    config (cached), runs, and returns the `T.empty` outputs named by `return`."""

    def __init__(self, fn, target, pass_configs):
        self.fn = fn
        self.target = target
        self.pass_configs = pass_configs
        self.signature = inspect.signature(fn)
        self.tensor_names = eager.tensor_param_names(fn)
        self.scalar_names = list(eager.scalar_param_dtypes(fn))
        # what a call passes the Kernel, in signature order: tensors and run-time scalars
        self.call_names = [n for n in self.signature.parameters
                           if n in self.tensor_names or n in self.scalar_names]
        self._probes: dict = {}
        self._cache: dict = {}
        functools.update_wrapper(self, fn)

    def _split(self, args, kwargs, where):
        """(tensors by parameter name, config values by name, constants given by name)."""
        try:
            bound = self.signature.bind_partial(*args, **{k: v for k, v in kwargs.items()
                                                          if k in self.signature.parameters})
        except TypeError as e:
            raise TileCallError(f"{self.fn.__name__}(): {e}", where,
                                hint=f"the signature is {self.fn.__name__}{self.signature}") from None
        bound.apply_defaults()
        tensors, config, scalars = {}, {}, {}
        for name, v in bound.arguments.items():
            if name in self.scalar_names:
                scalars[name] = v
            elif name in self.tensor_names:
                if getattr(v, "shape", None) is None or getattr(v, "dtype", None) is None:
                    raise TileCallError(
                        f"argument {name} of {self.fn.__name__} is a {type(v).__name__}, but "
                        f"{name} is declared as a tensor", where,
                        hint="pass a NumPy array or a torch tensor")
                tensors[name] = v
            else:
                config[name] = v
        missing = [n for n in self.signature.parameters if n not in bound.arguments]
        consts = {n: v for n, v in kwargs.items() if n not in self.signature.parameters}
        tensors.update(scalars)  # run-time values, passed to the Kernel (never a cache key)
        return tensors, config, consts, missing

    def _probe(self, config: dict):
        key = _key(config)
        pr = self._probes.get(key) if key is not None else None
        if pr is None:
            pr = eager.probe(self.fn, config)
            if key is not None:
                self._probes[key] = pr
        return pr

    def _kernel(self, args, kwargs, where, need_tensors: bool):
        tensors, config, given, missing = self._split(args, kwargs, where)
        if missing:
            absent = [n for n in missing if n not in self.call_names or need_tensors]
            if absent:
                raise TileCallError(f"{self.fn.__name__}() is missing argument {absent[0]!r}", where,
                                    hint=f"the signature is {self.fn.__name__}{self.signature}")
        if need_tensors and given:
            raise TileCallError(f"{self.fn.__name__}() got unexpected keyword {next(iter(given))!r}",
                                where, hint="constants are bound from the tensors' shapes when it "
                                "is called; pass them only to .compile(...)")
        pr = self._probe(config)
        binding = eager.bind_shapes(pr, tensors, given, where)
        key = _key((config, binding, _read_values(self.fn)))
        if key is not None and key in self._cache:
            return self._cache[key], tensors
        func = eager.build(self.fn, config, binding)
        n_in = len(self.call_names)
        n_out = len(func.params) - len(self.tensor_names) - len(func.attr("scratch", ()))
        k = compile(func, list(range(n_in, n_in + n_out)),
                    self.target, self.pass_configs)
        if key is not None:
            self._cache[key] = k
        return k, tensors

    def __call__(self, *args, **kwargs):
        """Compile (once per binding) and run on these tensors; returns the outputs."""
        k, tensors = self._kernel(args, kwargs, caller_loc(), need_tensors=True)
        return k(*(tensors[n] for n in self.call_names))

    def compile(self, *args, **kwargs) -> Kernel:
        """The Kernel for these tensors and/or constants: `matmul.compile(M=64, N=64, K=32)`."""
        return self._kernel(args, kwargs, caller_loc(), need_tensors=False)[0]

    def get_prim_func(self, *args, **kwargs) -> PrimFunc:
        """The PrimFunc for these tensors and/or constants, without compiling."""
        where = caller_loc()
        tensors, config, given, _ = self._split(args, kwargs, where)
        return eager.build(self.fn, config, eager.bind_shapes(self._probe(config), tensors, given, where))

    get_tir = get_prim_func

    def get_kernel_source(self, *args, **kwargs) -> str:
        """The generated code for these tensors and/or constants (see Kernel.get_kernel_source)."""
        return self._kernel(args, kwargs, caller_loc(), need_tensors=False)[0].get_kernel_source()


def _key(obj):
    """A hashable cache key for config values and bindings, or None when one is unhashable."""
    if isinstance(obj, dict):
        key = tuple(sorted((k, _key(v) if isinstance(v, (dict, tuple, list)) else v)
                           for k, v in obj.items()))
    elif isinstance(obj, (tuple, list)):
        key = tuple(_key(v) if isinstance(v, (dict, tuple, list)) else v for v in obj)
    else:
        key = obj
    try:
        hash(key)
    except TypeError:
        return None
    return key
