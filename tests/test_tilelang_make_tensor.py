"""`T.ptr` / `T.make_tensor` (issue 14: TileLang's pointer-table grouped GEMM): tensors at
addresses a kernel reads from a table, on interp against NumPy; the located refusals elsewhere
and for misuse; `tilecore.compile`'s TileLang keywords."""

import importlib.util
import warnings

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.errors import TileError, TileRuntimeError, TileSyntaxError, TileTargetError, TileTypeError

HAVE_EMU = importlib.util.find_spec("tilecore_emu") is not None
G, M, K, BM = 3, 20, 16, 8  # M is not a multiple of BM: the last tile's copy is clipped


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))


def _gather():
    """Out[g] = 2 * (the tensor at table entry g), through a tile copy and an element load."""
    @T.prim_func
    def k(P: T.Tensor([G], T.ptr), Out: T.Tensor([G, M, K], "float32")):
        with T.Kernel(G, T.ceildiv(M, BM)) as (g, bm):
            A = T.make_tensor(P[g], (M, K), "float32")
            tile = T.alloc_fragment((BM, K), "float32")
            T.copy(A[bm * BM, 0], tile)
            for i, j in T.Parallel(BM, K):
                if bm * BM + i < M:
                    Out[g, bm * BM + i, j] = tile[i, j] + A[bm * BM + i, j]
    return k


def test_make_tensor_reads_each_table_entry():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((M, K)).astype(np.float32) for _ in range(G)]
    table = np.array([a.ctypes.data for a in arrays], dtype=np.int64)
    out = np.zeros((G, M, K), np.float32)
    tilecore.compile(_gather(), target="interp")(table, out)
    np.testing.assert_array_equal(out, 2 * np.stack(arrays))


def test_make_tensor_writes_through_the_address():
    @T.prim_func
    def k(P: T.Tensor([2], T.ptr)):
        with T.Kernel(2) as g:
            C = T.make_tensor(P[g], (4, 8), "float16")
            T.fill(C, g + 1)
    outs = [np.zeros((4, 8), np.float16) for _ in range(2)]
    tilecore.compile(k, target="interp")(np.array([o.ctypes.data for o in outs], np.int64))
    assert [float(o.min()) for o in outs] == [1.0, 2.0] and [float(o.max()) for o in outs] == [1.0, 2.0]


def test_a_null_address_is_a_located_runtime_error():
    with pytest.raises(TileRuntimeError, match="null address") as e:
        tilecore.compile(_gather(), target="interp")(np.zeros(G, np.int64), np.zeros((G, M, K), np.float32))
    assert e.value.loc is not None and e.value.loc.file == __file__


@pytest.mark.parametrize("target", [pytest.param("emu:sm_80", marks=pytest.mark.skipif(
    not HAVE_EMU, reason="no emu")), "cpu"])
def test_other_targets_refuse_at_the_make_tensor_line(target):
    with pytest.raises(TileTargetError, match="T.make_tensor") as e:
        tilecore.compile(_gather(), target=target)
    assert e.value.loc.file == __file__ and "make_tensor" in e.value.loc.source_line()


def test_misuse_is_located():
    with pytest.raises(TileTypeError, match="64-bit address") as e:
        @T.prim_func
        def narrow(P: T.Tensor([2], "int32")):
            with T.Kernel(2) as g:
                A = T.make_tensor(P[g], (4,), "float32")  # noqa: F841
    assert e.value.loc.file == __file__
    with pytest.raises(TileSyntaxError, match="inside T.Parallel"):
        @T.prim_func
        def in_parallel(P: T.Tensor([2], T.ptr)):
            with T.Kernel(1):
                for i in T.Parallel(2):
                    A = T.make_tensor(P[i], (4,), "float32")  # noqa: F841


def test_compile_takes_tilelangs_host_keywords_with_a_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tilecore.compile(_gather(), target="interp", execution_backend="auto")
    assert any("execution_backend" in str(x.message) for x in w)
    with pytest.raises(TileError, match="unknown keyword"):
        tilecore.compile(_gather(), target="interp", no_such_option=1)


def test_the_script_spells_make_tensor():
    # the compile cache keys on the script: the view's shape and dtype are part of it
    assert f"A = T.make_tensor(P[g], ({M}, {K}), T.float32)" in _gather().script()
