"""What a `tvm:*` target can express (no `tvm` import): the lowering's switches per target."""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import target_dtypes

# tvm:<kind>: (TVM target dict, runs here, GPU-style thread mapping)
KINDS = {
    "llvm": ({"kind": "llvm", "mcpu": "x86-64"}, True, False),
    "webgpu": ({"kind": "webgpu"}, True, True),
    "rocm": ({"kind": "rocm", "mcpu": "gfx942"}, False, True),
    "metal": ({"kind": "metal"}, False, True),
    "opencl": ({"kind": "opencl"}, False, True),
}


class Unsupported(Exception):
    """Raised by the lowering for a program the target cannot express; its message is the
    reason `tile_unsupported` reports (conformance counts it as a skip, compile raises it)."""


@dataclass(frozen=True)
class Caps:
    """The lowering's view of a target: `gpu` (blocks on blockIdx.x, threads on threadIdx.x,
    tiles in shared memory, a barrier between tile statements) or CPU (blocks as a loop, each
    block's statements in order); `dtypes` the tilecore dtype names it holds (None: all)."""

    kind: str
    gpu: bool
    dtypes: frozenset | None

    @property
    def has_64bit(self) -> bool:
        """Whether float64 / int64 exist (accumulators and int->float casts use them)."""
        return self.dtypes is None

    def check_dtype(self, d, what: str) -> None:
        """Raise Unsupported when dtype `d` cannot appear on this target."""
        if self.dtypes is not None and d.name not in self.dtypes:
            raise Unsupported(f"tvm:{self.kind} has no {d.name} ({what}); it holds "
                              f"{', '.join(sorted(self.dtypes))}")


def caps_for(kind: str) -> Caps:
    """The capabilities of target `tvm:<kind>`."""
    return Caps(kind, KINDS[kind][2], target_dtypes(kind))
