"""metal-cpu under ThreadSanitizer: a generated Metal kernel built as a standalone executable
with `-fsanitize=thread` and run once, so a missing `threadgroup_barrier` shows up as a data
race between the CPU threads that play two Metal threads.

An executable rather than the shared library: TSan's runtime must be loaded when the process
starts, which a library opened by Python through ctypes cannot arrange.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tilecore.errors import TileTargetError

from .build import SHIM_DIR, TSAN_FLAGS, _compile, find_clang, translation_unit


@dataclass(frozen=True)
class TsanReport:
    """What one sanitized run printed: `races` counts "WARNING: ThreadSanitizer: data race"."""

    returncode: int
    output: str

    @property
    def races(self) -> int:
        return self.output.count("WARNING: ThreadSanitizer: data race")


def _main(nbytes: list[int], sizes: list[int], grid: tuple[int, int, int]) -> str:
    lines = ["", "int main() {"]
    for i, n in enumerate(nbytes):
        lines.append(f"  alignas(16) static unsigned char b{i}[{max(16, n)}];")
    lines.append(f"  void* bufs[] = {{{', '.join(f'b{i}' for i in range(len(nbytes))) or 'nullptr'}}};")
    lines.append(f"  const long long sizes[] = {{{', '.join(map(str, sizes)) or '0'}}};")
    lines.append(f"  return tilecore_launch(bufs, sizes, {grid[0]}u, {grid[1]}u, {grid[2]}u);")
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_under_tsan(msl: str, artifact, nbytes: list[int], sizes: list[int],
                   grid: tuple[int, int, int]) -> TsanReport:
    """Build `msl` (the artifact's source, possibly edited) with the artifact's launcher and a
    main that passes zeroed buffers of `nbytes` and the symbolic `sizes` (one per kernel
    parameter, 0 for tensors), run it on `grid`, and collect TSan's report."""
    cxx = find_clang()
    if cxx is None:
        raise TileTargetError("ThreadSanitizer runs of metal-cpu need clang++",
                              hint="apt-get install -y clang-22, or set TILECORE_CLANGXX")
    from dataclasses import replace

    tu = translation_unit(replace(artifact.rendered, source=msl), artifact.positions)
    with tempfile.TemporaryDirectory(prefix="tilecore-tsan-") as tmp:
        src = Path(tmp) / "kernel.cpp"
        src.write_text(tu + _main(nbytes, sizes, grid))
        exe = Path(tmp) / "kernel"
        flags = [f for f in TSAN_FLAGS if f not in ("-shared", "-fPIC")]
        _compile(cxx, [*flags, "-I", str(SHIM_DIR), str(src), "-o", str(exe)], "the sanitized kernel")
        res = subprocess.run([str(exe)], capture_output=True, text=True, check=False, timeout=300,
                             env={"TSAN_OPTIONS": "halt_on_error=0 report_signal_unsafe=0"})
    return TsanReport(res.returncode, res.stdout + res.stderr)
