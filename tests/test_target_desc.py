"""The target description: asked of the hooks once, then passes run on it alone.

These tests build TargetDescs by hand for a made-up thread-lowered target ("toydesc", warps of
4), so the lowering pipeline runs with no backend registered for it and the plugin manager
forbidden while passes run.
"""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from optional_backends import needs_interp  # noqa: E402

import tilecore
import tilecore.language as T
from tilecore import plugins
from tilecore.contract import Declined
from tilecore.errors import TileConfigWarning, TileInternalError, TilePerformanceWarning, TileTargetError
from tilecore.hookspec import hookimpl
from tilecore.ir.module import Module, ModuleAttrs
from tilecore.ir.stmt import KernelLaunch
from tilecore.ir.thread import ThreadKernel, find_kernel
from tilecore.ir.visit import rewrite, walk
from tilecore.lower.infer import FragmentLayouts
from tilecore.lower.tensorize import gemm_queries
from tilecore.options import Options
from tilecore.passes.base import Pass
from tilecore.passes.pipeline import render, run_pipeline
from tilecore.target import Target, TargetDesc, TargetFacts, TargetInfo

TOY = Target("toydesc", "t1")
FACTS = TargetFacts(TOY, lowers_to_threads=True, warp_size=4, max_threads=64,
                    shared_memory_bytes=1 << 16, vector_bytes=8, extra=(("flavour", "toy"),))
GEMM_LINE = None


def _gemm_func():
    global GEMM_LINE

    @T.prim_func
    def g(A: T.Tensor((8, 8), "float32"), B: T.Tensor((8, 8), "float32"),
          C: T.Tensor((8, 8), "float32")):
        with T.Kernel(1, threads=16) as bx:
            a = T.alloc_shared((8, 8), "float32")
            b = T.alloc_shared((8, 8), "float32")
            c = T.alloc_fragment((8, 8), "float32")
            T.copy(A[0, 0], a)
            T.copy(B[0, 0], b)
            T.clear(c)
            T.gemm(a, b, c)
            for i, j in T.Parallel(8, 8):
                c[i, j] = c[i, j] * 2.0
            T.copy(c, C[bx * 8, 0])

    GEMM_LINE = next(n.loc.line for n in walk(g.body) if type(n).__name__ == "Gemm")
    return g


def _desc(func, options=None, passes=()):
    answers = tuple((q, Declined("toydesc has no tensor cores")) for q in gemm_queries(func, 4))
    return TargetDesc(TOY, TOY, FACTS, options or Options(), answers, tuple(passes))


@pytest.fixture
def no_manager(monkeypatch):
    """Passes must not reach the plugin manager: calling it fails the test."""

    def forbidden():
        raise AssertionError("a pass called the plugin manager")

    monkeypatch.setattr(plugins, "manager", forbidden)


def test_lowering_runs_on_a_hand_made_description_without_plugins(no_manager):
    func = _gemm_func()
    stages = run_pipeline(Module(func, ModuleAttrs(target=TOY)), _desc(func))
    names = [n for n, _ in stages]
    assert names == ["input", "verify", "safe-memory", "simplify", "register-budget", "register-hints",
                     "reducer-partials", "layout-inference", "lower-threads", "async-pipeline",
                     "prefetch-pipelined", "insert-barriers", "fragment-pipeline", "wide-offsets",
                     "plan-shared"]
    k = find_kernel(stages[-1][1].func.body)
    assert isinstance(k, ThreadKernel) and k.warp_size == 4 and k.num_threads == 16
    # the reason reached the module, with the user's line, and the printed IR
    (d,) = stages[-1][1].attrs.diagnostics
    assert d.category == "performance" and d.loc.line == GEMM_LINE
    assert "toydesc has no tensor cores" in d.message
    assert "toydesc has no tensor cores" in render(stages[-1][1])


def test_description_reads_facts_by_name():
    func = _gemm_func()
    desc = _desc(func)
    assert desc.facts.warp_size == desc.warp_size == 4
    assert desc.shared_memory_bytes == 1 << 16 and desc.lowers_to_threads
    assert desc.get("flavour") == "toy" and desc.get("missing", 7) == 7
    with pytest.raises(AttributeError):
        desc.no_such_fact  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        desc.facts = FACTS  # type: ignore[misc]


def test_unasked_gemm_is_declined_with_a_reason():
    func = _gemm_func()
    (q,) = gemm_queries(func, 4)
    empty = TargetDesc(TOY, TOY, FACTS)
    assert isinstance(empty.tensorize(q), Declined)
    assert "after the target was described" in empty.tensorize(q).reason


def test_layouts_live_on_the_launch_and_survive_a_rebuilding_pass(no_manager):
    """A backend pass between layout-inference and lower-threads that rebuilds the launch (here:
    it adds an annotation) used to make lower-threads skip the launch silently."""

    def rebuild(module, desc):
        """Rebuild every KernelLaunch (same body, one more annotation)."""

        def fn(n):
            if isinstance(n, KernelLaunch):
                return dataclasses.replace(n, annotations=n.annotations + (("seen", True),))
            return None

        return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))

    func = _gemm_func()
    desc = _desc(func, passes=[("after:layout-inference", Pass("rebuild", rebuild))])
    stages = dict(run_pipeline(Module(func), desc))
    launch = next(n for n in walk(stages["rebuild"].func.body) if isinstance(n, KernelLaunch))
    stored = FragmentLayouts.of(launch)
    assert stored is not None and [b.name for b, _, _ in stored.entries] == ["c"]
    assert find_kernel(stages["lower-threads"].func.body) is not None


def test_a_fragment_added_after_layout_inference_is_reported(no_manager):
    def add_fragment(module, desc):
        """Allocate one more fragment in every launch."""
        from tilecore.ir.buffer import Buffer

        def fn(n):
            if isinstance(n, KernelLaunch):
                extra = Buffer("late", (4, 4), n.allocs[0].dtype, "fragment")
                return dataclasses.replace(n, allocs=n.allocs + (extra,))
            return None

        return module.with_func(module.func.with_body(rewrite(module.func.body, fn)))

    func = _gemm_func()
    desc = _desc(func, passes=[("after:layout-inference", Pass("late", add_fragment))])
    with pytest.raises(TileInternalError, match="late .*before:layout-inference"):
        run_pipeline(Module(func), desc)


def test_module_attributes_hold_no_functions(no_manager):
    func = _gemm_func()
    for _, m in run_pipeline(Module(func, ModuleAttrs(target=TOY)), _desc(func)):
        assert isinstance(m.attrs, ModuleAttrs)
        for f in dataclasses.fields(m.attrs):
            assert not callable(getattr(m.attrs, f.name)), f.name
    with pytest.raises(TypeError):
        Module(func, (("printer", print),))


def test_disable_thread_storage_sync_skips_barrier_insertion(no_manager):
    func = _gemm_func()
    desc = _desc(func, Options(disable_thread_storage_sync=True))
    names = [n for n, _ in run_pipeline(Module(func), desc)]
    assert "insert-barriers" not in names and "lower-threads" in names


class _ToyLowering:
    """A thread-lowering backend registered at run time (facts only)."""

    def __init__(self, kind, arch):
        self.kind, self.arch = kind, arch

    @hookimpl
    def tile_targets(self):
        return [TargetInfo(self.kind, "test lowering", priority=-50, archs=(self.arch,))]

    @hookimpl
    def tile_target_facts(self, target):
        if target.kind != self.kind:
            return None
        return dataclasses.replace(FACTS, target=target)


def test_describe_asks_each_hook_once_per_compile():
    calls = []

    class Counting(_ToyLowering):
        @hookimpl
        def tile_gemm_tensorize(self, target, query):
            if target.kind != self.kind:
                return None
            calls.append(query)
            return Declined("counting backend declines")

    plugins.register(Counting("toydesc", "t1"), name="toydesc")
    try:
        func = _gemm_func()
        desc = plugins.describe(Target("toydesc", "t1"), func, Options())
    finally:
        plugins.unregister("toydesc")
    assert len(calls) == 1 and desc.gemms == ((calls[0], Declined("counting backend declines")),)
    assert desc.lowering == desc.target == Target("toydesc", "t1")


@needs_interp
def test_two_backends_claiming_one_kind_is_an_error():
    with pytest.raises(TileTargetError, match="claimed by two backends"):
        plugins.register(_ToyLowering("interp", "x"), name="second-interp")
    # nothing stays registered: interp still resolves
    assert plugins.resolve("interp").kind == "interp"
    assert plugins.manager().get_plugin("second-interp") is None


def test_jit_rejects_unknown_keywords():
    with pytest.raises(tilecore.TileError, match="bogus_option"):
        tilecore.jit(out_idx=[-1], bogus_option="cython")


def test_jit_warns_on_tilelang_host_keywords():
    # TileLang's host-toolchain keywords mean nothing here: accepted with a warning, never silently
    with pytest.warns(TileConfigWarning, match="execution_backend"):
        tilecore.jit(out_idx=[-1], execution_backend="cython")


def test_performance_warning_names_the_users_line():
    func = _gemm_func()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with pytest.raises(TileTargetError):  # no backend builds toydesc: the warning comes first
            plugins.register(_ToyLowering("toydesc", "t1"), name="toydesc")
            try:
                tilecore.compile(func, [2], "toydesc")
            finally:
                plugins.unregister("toydesc")
    perf = [w for w in seen if issubclass(w.category, TilePerformanceWarning)]
    assert len(perf) == 1 and perf[0].lineno == GEMM_LINE and perf[0].filename == __file__
    assert "no installed backend tensorizes gemm(float32 x float32 -> float32, 8x8x8)" in str(perf[0].message)
