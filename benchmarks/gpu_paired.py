"""Interleaved A/B timing and SM clock / power sampling, for ratios that survive power capping.

On the H200 torch's own figure for one GEMM moved by up to 8% between rows of one run (the
board is power capped, BENCHMARKS.md), so two `do_bench` medians taken a second apart compare
two clock states as much as two kernels. `bench_pair` times `a` and `b` alternately (order
swapped every pair), each after the same 256 MB zeroing flush as `do_bench`, and returns both
medians and the median of the per-pair ratios: a slow drift of the clock moves both sides of
every pair alike. `ClockSampler` reads the SM clock and the board power through NVML
(libnvidia-ml loaded with ctypes, so no Python package is needed) in a thread while a
benchmark runs; without NVML it reports nothing.
"""

from __future__ import annotations

import ctypes
import statistics
import threading
import time

_NVML_CLOCK_SM = 1


class _Nvml:
    """The three NVML calls this needs, or `ok = False` where the library is absent."""

    def __init__(self):
        self.ok = False
        try:
            self.lib = ctypes.CDLL("libnvidia-ml.so.1")
            if self.lib.nvmlInit_v2() != 0:
                return
            self.handle = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle)) != 0:
                return
            self.ok = True
        except OSError:
            pass

    def sample(self) -> tuple[int, float] | None:
        """(SM clock MHz, board power W) now, or None."""
        mhz, mw = ctypes.c_uint(), ctypes.c_uint()
        if self.lib.nvmlDeviceGetClockInfo(self.handle, _NVML_CLOCK_SM, ctypes.byref(mhz)) != 0:
            return None
        if self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw)) != 0:
            return None
        return mhz.value, mw.value / 1000.0


_NVML: _Nvml | None = None


def nvml() -> _Nvml:
    """The process's one NVML handle (opened on first use)."""
    global _NVML
    if _NVML is None:
        _NVML = _Nvml()
    return _NVML


class ClockSampler:
    """`with ClockSampler() as s: ...` then `s.mhz`, `s.watts`: medians of samples taken every
    `period` seconds during the block (None without NVML or without samples)."""

    def __init__(self, period: float = 0.002):
        self.period, self.samples = period, []
        self.mhz = self.watts = None
        self._stop = threading.Event()

    def _run(self):
        dev = nvml()
        while not self._stop.is_set():
            s = dev.sample()
            if s is not None:
                self.samples.append(s)
            time.sleep(self.period)

    def __enter__(self):
        if nvml().ok:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if nvml().ok:
            self._thread.join()
        if self.samples:
            self.mhz = statistics.median(s[0] for s in self.samples)
            self.watts = statistics.median(s[1] for s in self.samples)
        return False


def bench_pair(torch, a, b, reps: int = 60, warmup: int = 5, read_flush: bool = False) -> dict:
    """Alternate `a` and `b` (a, b, then b, a, ...), each timed by CUDA events after zeroing a
    256 MB buffer (do_bench's flush, which leaves L2 full of dirty lines) or, `read_flush`,
    after reading one (L2 left clean); medians in ms of each and of the per-pair ratio
    t_b / t_a (> 1: `a` is faster), with the SM clock and power sampled over the whole loop."""
    if read_flush:
        buf = torch.ones(128 << 20, dtype=torch.float16, device="cuda")
        flush = type("ReadFlush", (), {"zero_": lambda self: buf.sum()})()
    else:
        flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        a()
        b()
    ev = [[tuple(torch.cuda.Event(enable_timing=True) for _ in range(2)) for _ in range(2)]
          for _ in range(reps)]
    torch.cuda.synchronize()
    with ClockSampler() as clock:
        for i, pair in enumerate(ev):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for j in order:
                flush.zero_()
                pair[j][0].record()
                (a if j == 0 else b)()
                pair[j][1].record()
        torch.cuda.synchronize()
    ta = [p[0][0].elapsed_time(p[0][1]) for p in ev]
    tb = [p[1][0].elapsed_time(p[1][1]) for p in ev]
    return dict(a_ms=statistics.median(ta), b_ms=statistics.median(tb),
                ratio=statistics.median(y / x for x, y in zip(ta, tb)), mhz=clock.mhz, watts=clock.watts)


def clocked(torch, fn, ms: float, seconds: float = 0.15):
    """(SM clock MHz, power W) medians while `fn` (about `ms` per call) runs back to back for
    about `seconds` (no flush: the clock the kernel itself sustains); (None, None) without NVML."""
    if not nvml().ok:
        return None, None
    reps = max(10, int(seconds * 1e3 / max(ms, 1e-3)))
    torch.cuda.synchronize()
    with ClockSampler() as clock:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return clock.mhz, clock.watts
