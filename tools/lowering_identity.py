"""Snapshot of what the lowering produces, to prove a lowering speed-up changes nothing.

    python tools/lowering_identity.py --out /tmp/before.txt        # on the old code
    python tools/lowering_identity.py --out /tmp/after.txt         # on the new code
    diff /tmp/before.txt /tmp/after.txt                            # must be empty

For every `examples/*.py` kernel (each TEST_SIZES entry, the default sizes, and the sizes of
`benchmarks/pipeline_time.py`) and a deterministic sample of generated conformance programs
(`--programs`, drawn from a fixed Hypothesis seed), on cuda:sm_90a, cuda:sm_80, hip:gfx942,
hip:gfx1100, metal:apple9 and the core's toy:w4 / toy:w64 (`--targets`; tests/toy_backend.py is
registered here as tests/conftest.py does), it runs the pipeline (describe + every pass, as
`tilecore.compile` does, without building) and writes the printed final thread IR and the
backend's rendered source. `--stages` also writes the printed IR of every intermediate stage.
Nothing needs a GPU or a device compiler. A program a target declines is written as its reason;
the IR verifiers run after every pass (TILECORE_VERIFY=1, as in the test suites).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import inspect
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = "cuda:sm_90a,cuda:sm_80,hip:gfx942,hip:gfx1100,metal:apple9,toy:w4,toy:w64"
# the kernels and sizes benchmarks/pipeline_time.py times
BENCH_SIZES = {"gemm": dict(M=4096, N=4096, K=4096), "flash_attention": dict(seq_len=4096, dim=128)}


def _examples() -> list[tuple[str, object]]:
    """(label, PrimFunc) for every example program at every size it is tested at."""
    from tilecore.example_protocol import example_files, sizes_for

    sys.path.insert(0, str(ROOT / "examples"))
    out = []
    for path in example_files(ROOT / "examples"):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)
        sizes = [dict(s) for s in mod.TEST_SIZES] + [{}]
        if path.stem in BENCH_SIZES:
            sizes.append(BENCH_SIZES[path.stem])
        for s in sizes:
            kw = sizes_for(mod.program, s)
            label = f"{path.stem}({', '.join(f'{k}={v}' for k, v in sorted(kw.items()))})"
            try:
                func = mod.program(**kw)
            except Exception as e:  # noqa: BLE001 - a factory that fails is recorded, not fatal
                out.append((label, f"factory failed: {type(e).__name__}: {e}"))
                continue
            if inspect.isfunction(func):  # an eager-style factory returns the kernel's builder
                continue
            out.append((label, func))
    return out


def _programs(n: int, seed: int) -> list[tuple[str, object]]:
    """(label, PrimFunc) for `n` generated conformance programs drawn from Hypothesis `seed`."""
    from tilecore_conformance import loader, runner, suite

    got: dict = {}

    def record(case, target, s, func=None):
        got.setdefault(case.key, case)
        return runner.Outcome("pass")

    plain = suite.check_case
    suite.check_case = record
    try:
        suite.check_target("interp", max_examples=n, seed=seed, shrink=False)
    finally:
        suite.check_case = plain
    return [(f"conformance {k}", loader.prim_func(c)) for k, c in got.items()]


def _register_toy() -> None:
    """The toy backend of the core's tests (no renderer: its final thread IR is the output)."""
    from tilecore import plugins

    sys.path.insert(0, str(ROOT / "tests"))
    import toy_backend

    if plugins.manager().get_plugin("toy") is None:
        plugins.register(toy_backend.TOY, name="toy")


def _render(final, target) -> str:
    """The backend's source for the lowered module (what tile_build would compile)."""
    if target.kind == "cuda":
        from tilecore_cuda.render import render_cuda

        return render_cuda(final, target).source
    if target.kind == "hip":
        from tilecore_hip.render import render_hip

        return render_hip(final).source
    if target.kind == "metal":
        from tilecore_metal.render import render_metal

        return render_metal(final)[0].source
    return ""


def snapshot(label: str, func, target_name: str, stages: bool) -> tuple[str, float]:
    """The text recorded for one program on one target, and the CPU seconds its pipeline took."""
    from tilecore import compiler, plugins
    from tilecore.options import options_from_pass_configs
    from tilecore.passes.pipeline import render

    head = f"===== {label} @ {target_name}\n"
    if isinstance(func, str):
        return head + func + "\n", 0.0
    tgt = plugins.resolve(target_name)
    reason = plugins.unsupported(tgt, func)
    if reason:
        return head + f"unsupported: {reason}\n", 0.0
    opts = options_from_pass_configs(None)
    t = time.process_time()
    try:
        desc = plugins.describe(tgt, func, opts)
        result = compiler._stages(func, tgt, opts, desc)
    except Exception as e:  # noqa: BLE001 - an error is part of the behaviour being compared
        return head + f"error: {type(e).__name__}: {e}\n", time.process_time() - t
    spent = time.process_time() - t
    parts = [head]
    if stages:
        for name, mod in result[:-1]:
            parts.append(f"--- stage {name}\n{render(mod)}\n")
    final = result[-1][1]
    parts.append(f"--- final {result[-1][0]}\n{render(final)}\n")
    try:
        parts.append(f"--- source\n{_render(final, tgt)}\n")
    except Exception as e:  # noqa: BLE001
        parts.append(f"--- source error: {type(e).__name__}: {e}\n")
    return "".join(parts), spent


def main() -> None:
    """Write the snapshot; print the lowering CPU seconds and a digest of the whole."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--targets", default=TARGETS)
    ap.add_argument("--programs", type=int, default=30, help="generated conformance programs")
    ap.add_argument("--seed", type=int, default=20261203)
    ap.add_argument("--stages", action="store_true", help="also every intermediate stage")
    args = ap.parse_args()
    # as every test suite's conftest does: the IR verifiers run after every pass (a verifier
    # that starts refusing what it accepted shows up as an `error:` entry)
    os.environ.setdefault("TILECORE_VERIFY", "1")
    if "toy:" in args.targets:
        _register_toy()
    items = _examples() + (_programs(args.programs, args.seed) if args.programs else [])
    total = 0.0
    digest = hashlib.sha256()
    with open(args.out, "w") as f:
        for target_name in args.targets.split(","):
            for label, func in items:
                text, spent = snapshot(label, func, target_name, args.stages)
                total += spent
                f.write(text)
                digest.update(text.encode())
    print(f"{len(items)} programs x {len(args.targets.split(','))} targets: pipeline "
          f"{total:.1f} CPU-s; sha256 {digest.hexdigest()[:16]} -> {args.out}")


if __name__ == "__main__":
    main()
