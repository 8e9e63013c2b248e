"""The one ordered pass list, for every target.

Tile-level passes run for every target. Thread-level lowering passes (added by the lowering
modules) carry a `when` predicate on the TargetDesc (`lowers_to_threads`), so GPU-like targets
share one list instead of copying it per target. Backends add passes only at named anchors
(`before:<name>` / `after:<name>`) through the `tile_passes` hook; the core collects them into
`TargetDesc.passes` before the pipeline runs.

With TILECORE_VERIFY=1 (always in the test suites) the IR is verified after every pass: the
tile-IR verifier while the body is tile IR, the thread-IR verifier once it holds ThreadKernels.
"""

from __future__ import annotations

import os
import sys

from ..errors import TileInternalError
from ..ir.module import Module
from ..ir.thread import find_kernel
from ..target import TargetDesc
from .base import Pass
from .reg_budget import collect_register_hints, drop_register_budgets
from .safe_memory import safe_memory
from .simplify import simplify, verify_pass

CORE_PASSES: list[Pass] = [verify_pass, safe_memory, simplify, drop_register_budgets, collect_register_hints]


def _thread_level_pass() -> Pass:
    """Thread-level kernels on targets without thread lowering: refused, or lowered for
    interp (tilecore.lower.thread_exec); thread-lowering targets check them in lower-threads."""
    from ..lower.thread_exec import thread_level

    return Pass("thread-level", thread_level, lambda desc: not desc.facts.lowers_to_threads)


def _lowering_passes() -> list[Pass]:
    """The thread-level lowering passes (imported on first compile, keeping `import tilecore`
    light; a broken import must fail loudly rather than silently drop lowering)."""
    from ..lower import LOWERING_PASSES

    return list(LOWERING_PASSES)


def build_pass_list(desc: TargetDesc) -> list[Pass]:
    """Core passes (+ lowering), with the description's backend passes inserted at their
    anchors; only those that apply to `desc`."""
    passes = [p for p in CORE_PASSES + [_thread_level_pass()] + _lowering_passes()]
    for anchor, p in desc.passes:
        where, _, name = anchor.partition(":")
        idx = next((i for i, q in enumerate(passes) if q.name == name), None)
        if idx is None or where not in ("before", "after"):
            raise TileInternalError(f"pass {p.name!r} names unknown anchor {anchor!r}")
        passes.insert(idx if where == "before" else idx + 1, p)
    return [p for p in passes if p.applies(desc)]


def verify_enabled() -> bool:
    """Whether TILECORE_VERIFY asks for verification after every pass."""
    return os.environ.get("TILECORE_VERIFY", "") not in ("", "0", "false")


def verify_module(module: Module, after: str = "") -> None:
    """Check `module` with the verifier of its IR level; a failure is a TileInternalError
    naming the pass that produced it."""
    from ..ir.thread_verifier import verify_thread_func
    from ..ir.verifier import verify

    try:
        if find_kernel(module.func.body) is not None:
            verify_thread_func(module.func)
        else:
            verify(module.func)
    except TileInternalError as e:
        if after:
            raise TileInternalError(f"after pass {after!r}: {e}") from e
        raise


def run_pipeline(module: Module, desc: TargetDesc) -> list[tuple[str, Module]]:
    """Run every applicable pass; returns [(stage name, module)] starting with 'input'.

    Set TILECORE_DUMP_IR=1 to print every stage to stderr, or to a directory path to write one
    file per stage there; TILECORE_VERIFY=1 to verify the IR after every pass.
    """
    stages = [("input", module)]
    dump = os.environ.get("TILECORE_DUMP_IR", "")
    check = verify_enabled()
    for i, p in enumerate(build_pass_list(desc)):
        module = p(module, desc)
        if not isinstance(module, Module):
            raise TileInternalError(f"pass {p.name!r} returned {type(module).__name__}, not a Module")
        if check:
            verify_module(module, p.name)
        stages.append((p.name, module))
        if dump:
            _dump(dump, i, p.name, module)
    return stages


def render(module: Module) -> str:
    """Printable text of a module at any stage: tile IR as tilecore source, a body holding a
    ThreadKernel as thread IR; the module's diagnostics first, as comments."""
    if find_kernel(module.func.body) is not None:
        from ..ir.thread_printer import print_thread_func

        text = print_thread_func(module.func)
    else:
        text = module.func.script()
    notes = "".join(f"# {d.category}: {d}\n" for d in module.attrs.diagnostics)
    return notes + text


def _dump(dest: str, index: int, name: str, module: Module) -> None:
    text = render(module)
    if dest in ("1", "true", "stderr"):
        print(f"# ---- tilecore IR after pass {index}: {name}\n{text}", file=sys.stderr)
        return
    os.makedirs(dest, exist_ok=True)
    path = os.path.join(dest, f"{module.func.name}.{index:02d}.{name}.txt")
    with open(path, "w") as f:
        f.write(text)
