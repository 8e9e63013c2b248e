"""Every example, at every test size, on a toy target (warps of 4 or 64, scrambled mma lane
maps) against the example's own NumPy reference: the whole thread lowering and the emulator
with nothing but the core installed. The two widths alternate over the sizes, starting from a
different width in successive examples, so both run every multi-size example and each width
runs half the cases (every example also runs on interp, cpu, emu, metal-cpu and tvm in the
conformance corpus: the toy widths are what those cannot check)."""

import importlib

import numpy as np
import pytest

import tilecore
from tilecore.example_protocol import assert_outputs_match, example_files, sizes_for
from tilecore.ir.thread import find_kernel

EXAMPLES = [p.stem for p in example_files()]
TOY_TARGETS = ["toy:w4", "toy:w64"]


def cases():
    for n, name in enumerate(EXAMPLES):
        mod = importlib.import_module(name)
        for i, sizes in enumerate(mod.TEST_SIZES):
            target = TOY_TARGETS[(n + i) % len(TOY_TARGETS)]
            yield pytest.param(name, sizes, target, id=f"{name}-{i}-{target}")


def test_examples_are_found():
    assert {"elementwise_add", "gemm", "flash_attention", "softmax"} <= set(EXAMPLES)


@pytest.mark.parametrize("name,sizes,target", list(cases()))
def test_example_on_toy_matches_reference(name, sizes, target):
    mod = importlib.import_module(name)
    kernel = tilecore.jit(mod.program(**sizes_for(mod.program, sizes)), out_idx=mod.OUT_IDX, target=target)
    args = mod.make_inputs(np.random.default_rng(1), **sizes_for(mod.make_inputs, sizes))
    out = kernel(*args)
    ref = mod.reference(*args, **sizes_for(mod.reference, sizes))
    lowered = find_kernel(kernel.stages[-1][1].func.body)
    assert lowered is not None and lowered.warp_size == int(target.split(":w")[1])
    assert_outputs_match(out, ref, mod.TOLERANCE)
    if "T.gemm(" in kernel.get_ir("input") and "float8" not in kernel.get_ir("input"):
        # every fp16 gemm in the examples has an fp32 accumulator: the toy mma takes it (the
        # toy has no fp8 instruction; gemm_fp8 runs as SIMT multiply-adds there)
        assert "toy.mma" in kernel.get_ir("final")
