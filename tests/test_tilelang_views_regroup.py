"""`T.reshape` views that regroup dimensions as tile-operation operands (issue 14; TileLang's
`dsa_hisa/pool_mqa_fp8.py` reduces over `T.reshape(s, (block_N, block_Q, heads))` of a
`(block_N, block_Q * heads)` fragment): `T.reduce_*`, `T.cumsum` (in place too), `T.copy` in
both directions and `T.fill` through a view, against NumPy on every target that runs them."""

import numpy as np
import pytest
from optional_backends import isolated_cache, target_params  # noqa: F401 (isolated_cache: a fixture)

import tilecore
import tilecore.language as T

pytestmark = pytest.mark.usefixtures("isolated_cache")
N, Q, H = 16, 4, 8


def _kernel():
    @T.prim_func
    def k(S: T.Tensor((N, Q * H), T.float32), L: T.Tensor((N, Q), T.float32),
          C: T.Tensor((N, Q * H), T.float32), R: T.Tensor((Q, H, N), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_fragment((N, Q * H), T.float32)
            v = T.reshape(s, (N, Q, H))
            lg = T.alloc_fragment((N, Q), T.float32)
            T.copy(S, s)
            for i, q, h in T.Parallel(N, Q, H):
                v[i, q, h] = v[i, q, h] * 2
            T.reduce_sum(v, lg, dim=-1, clear=True)   # over the view's last dimension
            T.reduce_max(v, lg, dim=2, clear=False)   # reads the destination too
            T.copy(lg, L)
            t = T.alloc_fragment((Q * H, N), T.float32)
            tv = T.reshape(t, (Q, H, N))
            T.fill(tv, 1.0)
            T.cumsum(tv, dim=1)                       # in place through the view
            T.copy(tv, R)                             # a view as a copy source
            T.cumsum(v, dim=1)
            T.copy(s, C)
    return k


@pytest.mark.parametrize("target", target_params("interp", "cpu", "emu:sm_80"))
def test_regrouping_views_in_tile_operations_match_numpy(target):
    s = np.random.default_rng(0).standard_normal((N, Q * H)).astype(np.float32)
    out = [np.zeros((N, Q), np.float32), np.zeros_like(s), np.zeros((Q, H, N), np.float32)]
    tilecore.compile(_kernel(), target=target)(s, *out)
    v = (s * 2).reshape(N, Q, H)
    np.testing.assert_allclose(out[0], np.maximum(v.sum(-1), v.max(-1)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], np.cumsum(v, axis=1).reshape(N, Q * H), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out[2], np.cumsum(np.ones((Q, H, N), np.float32), axis=1))


def test_a_copy_into_a_regrouping_view_writes_the_base_in_row_major_order():
    @T.prim_func
    def k(A: T.Tensor((4, 12), T.float32), B: T.Tensor((8, 6), T.float32)):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_shared((8, 6), T.float32)
            T.copy(A, T.reshape(f, (4, 12)))
            T.copy(f, B)

    a = np.arange(48, dtype=np.float32).reshape(4, 12)
    b = np.zeros((8, 6), np.float32)
    tilecore.compile(k, target="interp")(a, b)
    np.testing.assert_array_equal(b, a.reshape(8, 6))
