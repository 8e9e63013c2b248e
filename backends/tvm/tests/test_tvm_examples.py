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
from tilecore.example_protocol import as_outputs, assert_outputs_match

EXAMPLES = [p.stem for p in example_files()]
# examples WebGPU cannot hold, and the limit the refusal names
REFUSED_ON_WEBGPU = {"flash_attention": "bytes of shared memory",
                     "flash_attention_bwd": "bytes of shared memory", "gemm_fp8": "has no float8"}


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
        # gemm operand) in shared memory: 40 KiB and more, over WebGPU's 32 KiB; WGSL has no fp8
        assert target == "tvm:webgpu" and name in REFUSED_ON_WEBGPU, str(e)
        assert REFUSED_ON_WEBGPU[name] in str(e)
        return
    oracle = tilecore.jit(func, out_idx=mod.OUT_IDX, target="interp")
    args = mod.make_inputs(np.random.default_rng(1), **_split(mod.make_inputs, sizes))
    out = kernel(*args)
    ref = mod.reference(*args, **_split(mod.reference, sizes))
    want = oracle(*args)
    assert_outputs_match(out, ref, mod.TOLERANCE)  # every output (decoding returns several)
    if mod.TOLERANCE["rtol"] == 0 and mod.TOLERANCE["atol"] == 0:
        assert_outputs_match(out, want, mod.TOLERANCE)
        return
    for o, w in zip(as_outputs(out), as_outputs(want)):
        # the backend's tolerance for the output dtype, or the example's where its intermediates
        # are narrower than its outputs (MLA's fp32 partials come from bf16 products)
        rtol, atol = plugins.manager().hook.tile_tolerance(target=kernel.target, dtype=dt.from_numpy(o.dtype))
        rtol, atol = max(rtol, mod.TOLERANCE["rtol"]), max(atol, mod.TOLERANCE["atol"])
        np.testing.assert_allclose(_as_f32(o), _as_f32(w), rtol=rtol, atol=atol)
