"""The data that crosses the core/backend boundary, next to the hooks (`tilecore.hookspec`).

Everything here is a frozen dataclass or a `typing.Protocol`, so a backend can be written from
this module and `hookspec.py` alone:

- `GemmQuery` / `MmaPlan` / `Declined`: the question `tile_gemm_tensorize` answers and its two
  possible answers (a plan, or a reason why not, which the core reports to the user);
- `Artifact`: what `tile_build` returns and `Kernel` runs;
- `Diagnostic`: a note the pipeline attaches to a module (e.g. why a gemm runs without tensor
  cores), shown by `Kernel.get_ir` and emitted once as a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .dtypes import DType
from .errors import SourceLoc


@dataclass(frozen=True)
class GemmQuery:
    """One gemm as the backend sees it: C[M, N] (+)= op(A)[M, K] @ op(B)[K, N] per block.

    Fields: the operand dtypes, the block tile `m` x `n` x `k`, the transposes, where A and B
    live (`"shared"` or `"fragment"`), the block's thread count, the target's warp size and the
    user's `T.GemmWarpPolicy` name (`"square"`, `"full_row"`, `"full_col"`), and
    `fixed_layouts`: the shared operands (`"A"`, `"B"`) whose `T.annotate_layout` placement is
    not the canonical swizzled layout (`tilecore.ir.smem_layout.canonical_layout`), the only one
    an instruction reading shared memory through matrix descriptors (wgmma) can take; lowering
    honours the user's placement, so such an operand needs an instruction that reads shared
    memory by address (ldmatrix, loads). Hashable: the target description keys its answers by
    query."""

    a_dtype: DType
    b_dtype: DType
    c_dtype: DType
    m: int
    n: int
    k: int
    transpose_a: bool
    transpose_b: bool
    a_scope: str
    b_scope: str
    threads: int
    warp_size: int
    policy: str
    fixed_layouts: tuple = ()


@dataclass(frozen=True)
class MmaPlan:
    """A backend's tensorization: `mma` (an `Intrinsic` of kind "mma") applied by a `warps` =
    (wm, wn) grid of warps, each owning an (M / wm) x (N / wn) sub-tile; `loaders` are candidate
    operand loaders (kind "ldmatrix"): lowering uses one whose lane map, placed on the operand,
    equals the mma operand's map, and falls back to per-element shared loads otherwise.
    `note`: when the backend answers with a slower instruction than it has because of the query
    (an operand in `fixed_layouts`), why, in words; the core tells the user once
    (TilePerformanceWarning at the `T.annotate_layout` line, with the fix)."""

    mma: object  # tilecore.ir.intrinsic.Intrinsic
    warps: tuple
    loaders: tuple = ()
    note: str = ""


@dataclass(frozen=True)
class Declined:
    """A backend's (or the core's) answer "no tensor cores for this gemm", with the reason the
    user is told, e.g. ``Declined("mma.sync needs float16 or bfloat16 operands, got float32")``."""

    reason: str

    def __post_init__(self):
        if not isinstance(self.reason, str) or not self.reason:
            raise TypeError("Declined needs a non-empty reason string")


GemmAnswer = MmaPlan | Declined


@dataclass(frozen=True)
class Diagnostic:
    """A note about the compiled program for the user: `category` (e.g. ``"performance"``),
    `message`, and the user's source line it concerns."""

    category: str
    message: str
    loc: SourceLoc | None = None

    def __str__(self) -> str:
        return f"{self.loc}: {self.message}" if self.loc is not None else self.message


@runtime_checkable
class Artifact(Protocol):
    """What `tile_build` returns: a compiled kernel the core can show and run.

    - ``source``: the generated code (``Kernel.get_kernel_source()``);
    - ``array_api``: ``"numpy"`` (run receives C-contiguous NumPy arrays) or ``"torch"`` (run
      receives contiguous torch tensors on ``device``);
    - ``device``: for ``array_api == "torch"`` only, the torch device that NumPy inputs are
      moved to and outputs allocated on when no tensor argument names one;
    - ``run(args, dyn)``: execute once; ``args`` are all parameters in order (outputs included,
      written in place), ``dyn`` maps each symbolic dimension's name to its int value.

    Optional: ``cache_entry() -> (meta: dict, blobs: dict[str, bytes]) | None`` makes the
    artifact storable in the compile cache (JSON-serialisable `meta`, no pickle); the backend's
    ``tile_artifact_load`` hook turns it back into an artifact in a later process. Optional:
    ``launcher(dyn) -> callable(args)`` returns a function doing what ``run(args, dyn)`` does
    for those sizes with every per-size decision taken once (the Kernel caches it per call
    signature, see `tilecore.kernel`).
    """

    source: str
    array_api: str

    def run(self, args: list, dyn: dict[str, int]) -> None:
        """Execute the kernel on `args` with symbolic sizes `dyn`."""

