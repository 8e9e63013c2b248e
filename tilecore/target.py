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
            raise TileTargetError(f"a target is a string like 'interp' or 'cuda:sm_90', got {spec!r}")
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
