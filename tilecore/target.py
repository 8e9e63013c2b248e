"""Targets: what a kernel is compiled for (`"cuda:sm_90"`), and the facts a backend declares."""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import TileTargetError


@dataclass(frozen=True)
class Target:
    """A parsed target string: `kind` (interp, cpu, cuda, emu, ...) and an optional `arch`."""

    kind: str
    arch: str | None = None

    @staticmethod
    def parse(spec) -> Target:
        """`"cuda"`, `"cuda:sm_90"`, `"emu:sm_80"`, or a Target."""
        if isinstance(spec, Target):
            return spec
        if not isinstance(spec, str) or not spec.strip():
            raise TileTargetError(f"a target is a string like 'interp' or 'cuda:sm_90', got {spec!r}",
                                  hint="`python -m tilecore targets` lists the installed ones")
        kind, _, arch = spec.strip().partition(":")
        return Target(kind.lower(), arch or None)

    def __str__(self) -> str:
        return self.kind if self.arch is None else f"{self.kind}:{self.arch}"


@dataclass(frozen=True)
class TargetInfo:
    """What a backend declares about one target kind it provides (`tile_targets` hook).

    `priority` orders `target="auto"` (highest runnable wins); `available` says whether it can
    run on this machine (a callable returning (ok, reason)); `archs` lists accepted arch suffixes.
    """

    kind: str
    description: str
    priority: int = 0
    archs: tuple = ()
    default_arch: object = None  # str, or a callable returning one
    available: object = None
    # generated programs the conformance CI profile runs on this target (None: the profile's
    # 300); a backend whose per-program build cost would break CI's time budget lowers it
    ci_programs: int | None = None
    # which sub-byte dtypes (T.int4, uint4, T.float4_e2m1fn: one value per byte in storage) run
    # here: True for all of them, or a tuple of their names; a kernel holding one the target does
    # not declare is refused by name (tilecore.subbyte)
    sub_byte: bool | tuple[str, ...] = False

    def arch(self) -> str | None:
        """The default arch; `default_arch` may be a callable so that probing a device (which can
        import heavy libraries) happens only when this target is actually chosen."""
        if callable(self.default_arch):
            return self.default_arch()
        return self.default_arch

    def runnable(self) -> tuple[bool, str]:
        if self.available is None:
            return True, ""
        return self.available()


@dataclass(frozen=True)
class TargetFacts:
    """Machine facts a backend reports for a target (`tile_target_facts` hook).

    Lowering passes read these instead of hard-coding a vendor: GPU-like targets set
    `lowers_to_threads`, and the thread-level pipeline runs for them.
    """

    target: Target
    lowers_to_threads: bool = False
    warp_size: int = 1
    max_threads: int = 1024
    shared_memory_bytes: int = 0
    vector_bytes: int = 16
    extra: tuple = field(default=())

    def get(self, key: str, default=None):
        for k, v in self.extra:
            if k == key:
                return v
        return default


@dataclass(frozen=True)
class TargetDesc:
    """Everything the passes may know about the target, asked of the hooks once before the
    pipeline runs (`tilecore.plugins.describe`) and frozen: passes are `(Module, TargetDesc) ->
    Module` and never call the plugin manager, so they can be run and tested on a hand-made
    description with no backend registered.

    - `target`: the compile target the user named (``emu:cuda:sm_80``); `tile_build` gets it;
    - `lowering`: the target whose lowering runs (``cuda:sm_80``): facts, tensorization and
      extra passes were asked for it; equal to `target` for every target but emulators;
    - `facts`: the lowering target's TargetFacts; its fields are also readable on the
      description itself (``desc.warp_size``, ``desc.get("sm")``);
    - `options`: the compile Options (from `pass_configs`);
    - `gemms`: ``((GemmQuery, MmaPlan | Declined), ...)``: the backend's answer for every
      distinct gemm of the program (see `tensorize`);
    - `passes`: the backends' extra ``(anchor, Pass)`` pairs.
    """

    target: Target
    lowering: Target
    facts: TargetFacts
    options: object = None  # tilecore.options.Options (imported lazily: it imports errors only)
    gemms: tuple = ()
    passes: tuple = ()

    def __post_init__(self):
        if self.options is None:
            from .options import Options

            object.__setattr__(self, "options", Options())

    def tensorize(self, query):
        """The backend's answer for `query` (a GemmQuery): an MmaPlan or a Declined reason.

        A query nobody was asked about (a pass created the gemm after the description was
        built) is declined with that reason rather than asked now: passes stay pure."""
        from .contract import Declined

        for q, answer in self.gemms:
            if q == query:
                return answer
        return Declined("this gemm was created by a pass after the target was described, so no "
                        "backend was asked to tensorize it")

    def get(self, key: str, default=None):
        """A backend-specific fact (`TargetFacts.get`)."""
        return self.facts.get(key, default)

    def __getattr__(self, name: str):
        # Only reached for names that are not fields: the facts' fields (warp_size,
        # shared_memory_bytes, lowers_to_threads, ...) read through the description, so a
        # pass written against `facts` works unchanged when handed the description.
        if name.startswith("__"):
            raise AttributeError(name)
        facts = object.__getattribute__(self, "facts")
        try:
            return getattr(facts, name)
        except AttributeError:
            raise AttributeError(f"TargetDesc has no field or fact {name!r}") from None
