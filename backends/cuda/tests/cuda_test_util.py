"""Test helpers: which CUDA tools this machine has, and the examples directory."""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from pathlib import Path

import pytest
from tilecore_conformance.corpus import example_files, sizes_for
from tilecore_cuda import build
from tilecore_cuda.build import nvcc_path

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
CI_ARCHS = ("sm_80", "sm_90a")


def has_gpu() -> bool:
    """A CUDA device and torch are both usable here."""
    from tilecore_cuda.plugin import _available

    return _available()[0]


def example_modules() -> list:
    """Every example module (each exposes program, TEST_SIZES, make_inputs, OUT_IDX, TOLERANCE)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    # the protocol's one reader: scripts without it (gemm_autotune, tensor_parallel_mlp) are not cases
    names = [p.stem for p in example_files(Path(EXAMPLES))]
    return [importlib.import_module(n) for n in names]


def example_cases() -> list:
    """(module, sizes) for every example and each of its TEST_SIZES, as pytest params."""
    out = []
    for mod in example_modules():
        for i, sizes in enumerate(mod.TEST_SIZES):
            out.append(pytest.param(mod, sizes, id=f"{mod.__name__}-{i}"))
    return out


needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="nvcc is not installed")
needs_gpu = pytest.mark.skipif(not has_gpu(), reason="no CUDA device (GPU tests run on the H200)")


split = sizes_for  # the one rule, shared with conformance and the other backends' tests


def _run_dir() -> Path:
    """A folder private to this test run and shared by its pytest-xdist workers (named by
    xdist's run id; a run without xdist gets one per process)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    d = Path(tempfile.gettempdir()) / f"tilecore-test-nvcc-{os.getuid()}" / run
    d.mkdir(parents=True, exist_ok=True)
    return d


# ---------------------------------------------------------------- kernels compiled in batches

BATCH = 8  # kernels per nvcc run: most of the fixed cost shared, chunks still spread over workers


def batched_resources(group: str, index: int, count: int, kernel_of) -> dict:
    """`{"registers", "frame_bytes"}` of kernel `index` of `group` (`count` kernels), built by
    one nvcc run with the other kernels of its chunk (BATCH consecutive indices of one arch;
    `tilecore_cuda.batch`), once per test run: the first worker to need a chunk builds it, the
    others read its results from the run's folder.

    `kernel_of(i)` gives `(entry, source, arch)` of kernel i, or raises. A kernel that does not
    lower or compile fails only its own test: when the chunk's run fails, each kernel of it is
    compiled alone and the failures are recorded per kernel (`{"error": log}`)."""
    import fcntl
    import json

    from tilecore_cuda.batch import batch_entry, batch_source

    chunk = index // BATCH
    path = _run_dir() / f"batch-{group}-{chunk}.json"
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a worker wanting the chunk waits for its builder
        if not path.exists():
            out: dict[str, dict] = {}
            by_arch: dict[str, list] = {}
            for i in range(chunk * BATCH, min(count, (chunk + 1) * BATCH)):
                try:
                    entry, source, arch = kernel_of(i)
                except Exception as e:  # noqa: BLE001 - recorded; that kernel's own test fails with it
                    out[str(i)] = {"error": f"{type(e).__name__}: {e}"}
                    continue
                by_arch.setdefault(arch, []).append((i, entry, source))
            for arch, items in by_arch.items():
                out.update(_build_chunk(group, chunk, arch, items, batch_entry, batch_source))
            path.with_suffix(".tmp").write_text(json.dumps(out))
            os.replace(path.with_suffix(".tmp"), path)
        return json.loads(path.read_text())[str(index)]


def _build_chunk(group, chunk, arch, items, batch_entry, batch_source) -> dict:
    """Resources of `items` ((index, entry, source)) from one nvcc run for `arch`; when that
    run fails, from one run per kernel (recording each kernel's own error)."""
    try:
        cubin = build.compile_cuda(batch_source([(e, s) for _, e, s in items]), arch,
                                   name=f"{group}_{chunk}", compiler="nvcc", use_cache=False)
        res = build.kernel_resources(cubin)
        return {str(i): res[batch_entry(e, k)] for k, (i, e, _) in enumerate(items)}
    except build.CudaCompileError:
        out = {}
        for i, entry, source in items:
            try:
                cubin = build.compile_cuda(source, arch, name=entry, compiler="nvcc", use_cache=False)
                out[str(i)] = build.cubin_resources(cubin)
            except build.CudaCompileError as e:
                out[str(i)] = {"error": str(e)}
        return out


def example_kernels() -> list[tuple]:
    """(module, sizes, arch) of every example, each of its TEST_SIZES, for each of CI_ARCHS,
    in the order their batches are built (one arch at a time)."""
    cases = [p.values for p in example_cases()]
    return [(mod, sizes, arch) for arch in CI_ARCHS for mod, sizes in cases]


def example_resources(mod, sizes: dict, arch: str) -> dict:
    """Registers and stack frame of example `mod` at `sizes` for cuda:`arch` from its batched
    nvcc build (shared by every test of the run that asks: compile and spill checks)."""
    import tilecore

    kernels = example_kernels()
    index = next(i for i, (m, s, a) in enumerate(kernels) if m is mod and s == sizes and a == arch)

    def kernel_of(i: int) -> tuple[str, str, str]:
        m, s, a = kernels[i]
        k = tilecore.compile(m.program(**split(m.program, s)), out_idx=m.OUT_IDX, target=f"cuda:{a}")
        return k.artifact.rendered.entry, k.get_kernel_source(), a

    res = batched_resources("examples", index, len(kernels), kernel_of)
    if "error" in res:
        pytest.fail(f"{mod.__name__} at {sizes} for {arch}:\n{res['error']}")
    return res
