"""How numba compiles a generated kernel: its own code's LLVM optimization level, chosen per
compile (`kernel_opt`), on a thread of its own (`on_fresh_stack`: a shallow Python stack).

A cold generated program's compile is about half LLVM (issue 16: the CI's 300 conformance
programs on cpu cost a sixth of a cold CI run), and most of that is the -O3 pass pipeline over
the serial launcher. The serial launcher is what a kernel called a few times runs (every test,
the quickstart); a kernel called often enough gets the parallel (`prange`) launcher, compiled
later at numba's own level (`NUMBA_OPT`, 3 by default). So `launch_serial` is compiled at
`SERIAL_OPT` (`TILECORE_CPU_OPT`, default 1): -O1 still inlines the runtime helpers and
vectorizes loops (numba asks for loop vectorization at every level), and none of LLVM's
levels changes a floating-point result without fast-math flags; the only fast-math code
(float sums in reduction helpers, `reassoc`) is compiled by a nested compile, which keeps
numba's level (below), so its summation order is the same at every `SERIAL_OPT`.

Only the kernel's own library (its function and module passes) gets the level: numba reads
`numba.config.OPT` each time it builds a pass pipeline, so it is set while numba compiles the
kernel and reset to numba's level for every nested compile (`numba:compile` events: runtime
helpers, reduction helpers, numba's overloads), whose results are shared by every kernel of
the process and by numba's disk cache. The machine-code generator keeps numba's level (it is
fixed when numba creates its target machine). numba's compiler lock is held throughout, so no
other thread compiles while the setting is changed.
"""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager

from tilecore.errors import TileConfigWarning

DEFAULT = 1


def _serial_opt() -> int:
    raw = os.environ.get("TILECORE_CPU_OPT", str(DEFAULT))
    if raw.strip() in ("1", "2", "3"):
        return int(raw)
    # 0 is refused too: numba does not cache unoptimized kernels ("uses dynamic globals")
    warnings.warn(f"TILECORE_CPU_OPT={raw!r} is not 1, 2 or 3; using {DEFAULT}",
                  TileConfigWarning, stacklevel=2)
    return DEFAULT


SERIAL_OPT = _serial_opt()


@contextmanager
def kernel_opt(dispatcher, level: int):
    """Around `dispatcher.compile(sig)`: numba compiles `dispatcher`'s own code at LLVM `level`
    and every compile nested in it (typing and lowering compile the functions it calls) at
    numba's configured level."""
    from numba.core import config, event
    from numba.core.compiler_lock import global_compiler_lock

    with global_compiler_lock:
        base = config.OPT
        if level == base:
            yield
            return
        mine = type(base)(level)  # numba's _OptLevel (an int with `is_opt_max`)
        saved: list = []

        class Scope(event.Listener):
            def on_start(self, ev):
                saved.append(config.OPT)
                config.OPT = mine if ev.data["dispatcher"] is dispatcher else base

            def on_end(self, ev):
                config.OPT = saved.pop()

        listener = Scope()
        event.register("numba:compile", listener)
        try:
            yield
        finally:
            event.unregister("numba:compile", listener)
            config.OPT = base


def on_fresh_stack(fn):
    """`fn()` run on a new thread, its result returned and its exception raised here.

    CPython 3.11 keeps each thread's frames in 16 KiB chunks that it maps and unmaps as the
    call depth crosses a chunk's end; numba's compiler recurses deeply and often, so how many
    chunks it maps depends on the depth it starts at: 10 kernels compiled 61 frames deep made
    234,000 mmaps (and as many munmaps and page faults), 34,000 at the bottom of a stack.
    Under pytest a kernel is compiled ~60 frames deep. A new thread starts at depth 0. When
    this thread holds numba's compiler lock (a compile inside a compile), the compile runs
    here: a new thread would wait for the lock forever."""
    import threading

    from numba.core.compiler_lock import global_compiler_lock

    if global_compiler_lock.is_locked():
        return fn()
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=run, name="tilecore-cpu-compile")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")
