"""The metal-cpu artifact: a rendered Metal kernel run on the CPU through the shim."""

from __future__ import annotations

import ctypes

import numpy as np

from tilecore.codegen.spec import RenderedKernel, host_int
from tilecore.errors import TileRuntimeError

from .build import compile_library, load_launch, translation_unit


class MetalCpuArtifact:
    """`tile_build`'s result for metal-cpu: `source` is the MSL (what a Mac would compile);
    the C++ translation unit is built on first run (or now, when `eager`)."""

    array_api = "numpy"

    def __init__(self, rendered: RenderedKernel, positions: tuple[str, ...], dyn_names: tuple[str, ...],
                 eager: bool = True):
        self.rendered = rendered
        self.dyn_names = dyn_names  # the symbolic sizes' IR names, in parameter order
        self.positions = positions
        self.source = rendered.source
        self._launch = None
        if eager:
            self.launch_fn()

    @property
    def cpu_source(self) -> str:
        """The C++ translation unit compiled for the CPU (the MSL plus its launcher)."""
        return translation_unit(self.rendered, self.positions)

    def launch_fn(self):
        """The compiled library's `tilecore_launch` (built or loaded from the cache once)."""
        if self._launch is None:
            self._launch = load_launch(compile_library(self.cpu_source))
        return self._launch

    def run(self, args: list, dyn: dict) -> None:
        """Run every threadgroup on `args` (C-contiguous NumPy arrays, parameter order)."""
        r = self.rendered
        pointers = [p for p in r.params if p.is_pointer]
        if len(args) != len(pointers):
            raise TileRuntimeError(f"{r.entry} takes {len(pointers)} arrays, got {len(args)}",
                                   hint="call the Kernel, which passes every parameter")
        arrays = [np.ascontiguousarray(a) for a in args]
        for a, orig in zip(arrays, args):
            if a is not orig:
                raise TileRuntimeError(f"{r.entry}: metal-cpu needs C-contiguous arrays",
                                       hint="pass np.ascontiguousarray(x)")
        bufs = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        values = iter(int(dyn[n]) for n in self.dyn_names)
        sizes = (ctypes.c_longlong * max(1, len(r.params)))(
            *[0 if p.is_pointer else next(values) for p in r.params])
        grid = [host_int(g, dyn) for g in r.grid]
        if any(g <= 0 for g in grid):
            return
        rc = self.launch_fn()(bufs, sizes, *grid)
        if rc != 0:
            raise TileRuntimeError(f"{r.entry}: the metal-cpu runner refused {r.block[0]} threads per group",
                                   hint="use fewer threads per block")
