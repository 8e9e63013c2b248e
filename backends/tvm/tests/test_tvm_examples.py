"""Every example at every test size on tvm:webgpu, against its NumPy reference and the interp
oracle (within tvm's tolerances). On tvm:llvm the conformance plugin's corpus test runs every
example against interp (the `tvm` kind is a runnable target), so it is not repeated here."""

import importlib

import numpy as np
import pytest
from tilecore_conformance.corpus import example_files
from tilecore_conformance.corpus import sizes_for as _split
from tvm_test_util import needs_tvm, needs_webgpu

import tilecore
from tilecore import dtypes as dt
from tilecore import plugins
from tilecore.errors import TileTargetError

EXAMPLES = [p.stem for p in example_files()]
TOO_LARGE_FOR_WEBGPU = {"flash_attention"}


def cases(target, mark):
    for name in EXAMPLES:
        mod = importlib.import_module(name)
        for i, sizes in enumerate(mod.TEST_SIZES):
            yield pytest.param(target, name, sizes, id=f"{target}-{name}-{i}", marks=[needs_tvm, mark])


def _as_f32(x):
    return np.asarray(x).astype(np.float32)


@pytest.mark.parametrize("target,name,sizes", list(cases("tvm:webgpu", needs_webgpu)))
def test_example(target, name, sizes):
    mod = importlib.import_module(name)
    func = mod.program(**_split(mod.program, sizes))
    try:
        kernel = tilecore.compile(func, out_idx=mod.OUT_IDX, target=target)
    except TileTargetError as e:
        # FlashAttention keeps Q, K, V, the scores (a reduction source) and their fp16 copy (a
        # gemm operand) in shared memory: 40 KiB and more, over WebGPU's 32 KiB
        assert target == "tvm:webgpu" and name in TOO_LARGE_FOR_WEBGPU, str(e)
        assert "bytes of shared memory" in str(e)
        return
    oracle = tilecore.jit(func, out_idx=mod.OUT_IDX, target="interp")
    args = mod.make_inputs(np.random.default_rng(1), **_split(mod.make_inputs, sizes))
    out = kernel(*args)
    ref = mod.reference(*args, **_split(mod.reference, sizes))
    want = oracle(*args)
    if mod.TOLERANCE["rtol"] == 0 and mod.TOLERANCE["atol"] == 0:
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(out, want)
        return
    np.testing.assert_allclose(_as_f32(out), _as_f32(ref), **mod.TOLERANCE)
    rtol, atol = plugins.manager().hook.tile_tolerance(target=kernel.target, dtype=dt.from_numpy(out.dtype))
    np.testing.assert_allclose(_as_f32(out), _as_f32(want), rtol=rtol, atol=atol)
