"""The launch path (parameter buffer, per-signature plans, CUDA graphs) and the cuda compile-cache
entry. The layout, entry and discovery tests run anywhere; the launch tests need a GPU."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
from cuda_test_util import EXAMPLES, needs_gpu
from hand_kernels import mma_module
from tilecore_cuda import launch
from tilecore_cuda.artifact import CudaArtifact, grid_from_json, grid_to_json
from tilecore_cuda.launch import Packer, ParamBuffer, ParamSpec
from tilecore_cuda.render import render_cuda

import tilecore
from tilecore import compile_cache
from tilecore import dtypes as dt
from tilecore.codegen.spec import host_int

if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)


def _slot(buf: ParamBuffer, i: int, ctype):
    return ctype.from_address(buf._ptrs[i]).value


def test_parameter_buffer_lays_out_and_writes_each_slot():
    class FakeTensor:
        def __init__(self, p):
            self.p = p

        def data_ptr(self):
            return self.p

    specs = (ParamSpec("A", dt.float16, True), ParamSpec("n", dt.int32, False),
             ParamSpec("B", dt.float32, True), ParamSpec("m", dt.int64, False))
    buf = ParamBuffer(specs)
    offsets = [buf._ptrs[i] - buf._ptrs[0] for i in range(4)]
    assert offsets == [0, 8, 16, 24]  # the int32 slot is padded to the next pointer's alignment
    buf.setters[0](FakeTensor(0xDEAD0000))
    buf.setters[1](-5)
    buf.setters[2](FakeTensor(0xBEEF0000))
    buf.setters[3](1 << 40)
    assert _slot(buf, 0, ctypes.c_uint64) == 0xDEAD0000 and _slot(buf, 1, ctypes.c_int32) == -5
    assert _slot(buf, 2, ctypes.c_uint64) == 0xBEEF0000 and _slot(buf, 3, ctypes.c_int64) == 1 << 40
    assert [p.per_call for p in buf.packers] == [True, False, True, False]


def test_a_new_parameter_kind_is_one_packer():
    """What a CUtensorMap parameter needs: 128 bytes aligned to 64, before the default packers."""
    def descriptor(spec):
        if spec.name != "desc":
            return None

        def make(address):
            def write(value):
                ctypes.memmove(address, value, 128)
            return write

        return Packer(128, 64, make, True)

    specs = (ParamSpec("n", dt.int32, False), ParamSpec("desc", dt.uint8, False),
             ParamSpec("A", dt.float16, True))
    buf = ParamBuffer(specs, [descriptor, *launch.PACKERS])
    assert buf._ptrs[1] % 64 == 0 and buf._ptrs[2] - buf._ptrs[1] == 128
    buf.setters[1](bytes(range(128)))
    assert ctypes.string_at(buf._ptrs[1], 128) == bytes(range(128))


def test_a_prepared_launch_passes_the_driver_its_arguments(monkeypatch):
    """What Launch hands cuLaunchKernelEx (a recording stand-in for the driver function): the
    CUlaunchConfig (grid, block, shared memory, the current stream), function and parameter
    array; and the retry after making the context current when the calling thread had none."""
    calls, current = [], []

    def fake_launch(*args):
        cfg = launch.LaunchConfig.from_address(args[0].value)
        ptrs = ctypes.cast(args[2].value, ctypes.POINTER(ctypes.c_void_p))
        calls.append([cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY,
                      cfg.blockDimZ, cfg.sharedMemBytes, cfg.hStream, cfg.attrs, cfg.numAttrs,
                      args[1].value, args[2].value, args[3], ctypes.c_uint64.from_address(ptrs[0]).value])
        return 201 if len(calls) == 1 else 0  # CUDA_ERROR_INVALID_CONTEXT once

    class FakeTensor:
        def __init__(self, p):
            self.p = p

        def data_ptr(self):
            return self.p

    monkeypatch.setattr(launch, "_launch_ex", lambda: fake_launch)
    monkeypatch.setattr(launch, "raw_stream_getter", lambda: (lambda index: 0x5000 + index))
    monkeypatch.setattr(launch, "make_current", current.append)
    specs = (ParamSpec("A", dt.float16, True), ParamSpec("C", dt.float32, True),
             ParamSpec("n", dt.int32, False))
    go = launch.Launch(0xF00D, 3, (70001, 2, 1), (128, 1, 1), 1024, specs, {2: 77})
    go([FakeTensor(0xA0), FakeTensor(0xC0)])
    assert current == [3] and len(calls) == 2
    assert calls[1] == [70001, 2, 1, 128, 1, 1, 1024, 0x5003, None, 0, 0xF00D, go.params.address,
                        None, 0xA0]
    assert _slot(go.params, 1, ctypes.c_uint64) == 0xC0 and _slot(go.params, 2, ctypes.c_int32) == 77
    go([FakeTensor(0xA8), FakeTensor(0xC8)])  # the next call: new pointers, no context retry
    assert current == [3] and calls[2][-1] == 0xA8 and _slot(go.params, 1, ctypes.c_uint64) == 0xC8
    fast = go.entry()  # what a call plan uses: the same launch without attribute lookups
    assert fast is not go.__call__ and fast.prepared is go
    del calls[:]
    fast([FakeTensor(0xB0), FakeTensor(0xD0)])  # fails once (context), retried: as __call__ does
    assert current == [3, 3] and len(calls) == 2
    assert calls[1] == [70001, 2, 1, 128, 1, 1, 1024, 0x5003, None, 0, 0xF00D, go.params.address,
                        None, 0xB0]
    assert _slot(go.params, 1, ctypes.c_uint64) == 0xD0 and _slot(go.params, 2, ctypes.c_int32) == 77


def test_programmatic_launch_waits_first_and_launches_as_a_dependent(monkeypatch):
    """Option programmatic_launch on sm_90: the kernel's first statement is griddepcontrol.wait
    and its prepared launch hands cuLaunchKernelEx one attribute, programmatic stream
    serialization (6) = 1; on sm_80 (no griddepcontrol) and without the option: neither."""
    import tilecore.language as T

    @T.prim_func
    def scale(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    def source(arch, on):
        return tilecore.compile(scale, out_idx=[-1], target=f"cuda:{arch}",
                                pass_configs={"tilecore.programmatic_launch": on}).get_kernel_source()

    body = source("sm_90", True).split(") {", 1)[1].lstrip()
    assert body.startswith('asm volatile("griddepcontrol.wait;" ::: "memory");')
    assert launch.GRID_WAIT not in source("sm_80", True) and launch.GRID_WAIT not in source("sm_90", False)
    seen = []

    def fake_launch(*args):
        cfg = launch.LaunchConfig.from_address(args[0].value)
        attrs = [launch.LaunchAttribute.from_address(cfg.attrs + i * ctypes.sizeof(launch.LaunchAttribute))
                 for i in range(cfg.numAttrs)]
        seen.append([(a.id, a.value) for a in attrs])
        return 0

    monkeypatch.setattr(launch, "_launch_ex", lambda: fake_launch)
    monkeypatch.setattr(launch, "raw_stream_getter", lambda: (lambda index: 0))
    assert ctypes.sizeof(launch.LaunchAttribute) == 72  # sizeof(CUlaunchAttribute)
    specs = (ParamSpec("A", dt.float32, True),)
    for programmatic in (True, False):
        launch.Launch(0xF00D, 0, (2, 1, 1), (128, 1, 1), 0, specs, {}, programmatic)([_Ptr(0xA0)])
    assert seen == [[(launch.PROGRAMMATIC_STREAM_SERIALIZATION, 1)], []]


class _Ptr:
    def __init__(self, p):
        self.p = p

    def data_ptr(self):
        return self.p


def test_a_prepared_tma_launch_writes_its_tensor_maps(monkeypatch):
    """TMA kernels take the prepared path: each tensor map sits in a 64-aligned 128-byte slot
    after the sizes and is re-encoded only when its tensor's address changes."""
    from tilecore_cuda import tensormap

    encoded = []

    def fake_encode(t, spec, what):
        encoded.append((t.data_ptr(), spec.box, what))
        return bytes([len(encoded)] * 128)

    class FakeTensor:
        def __init__(self, p):
            self.p = p

        def data_ptr(self):
            return self.p

    monkeypatch.setattr(tensormap, "encode", fake_encode)
    monkeypatch.setattr(launch, "_launch_ex", lambda: (lambda *args: 0))
    monkeypatch.setattr(launch, "raw_stream_getter", lambda: (lambda index: 0))
    box_a, box_b = tensormap.TensorMapSpec(0, dt.float16, (128, 64), 128), \
        tensormap.TensorMapSpec(1, dt.float16, (64, 64), 128)
    specs = (ParamSpec("A", dt.float16, True), ParamSpec("B", dt.float16, True),
             ParamSpec("n", dt.int32, False), ParamSpec("A", dt.float16, False, tmap=box_a),
             ParamSpec("B", dt.float16, False, tmap=box_b))
    go = launch.Launch(0xF00D, 0, (4, 4, 1), (384, 1, 1), 1024, specs, {2: 9})
    ptrs = go.params._ptrs
    assert ptrs[3] % 64 == 0 and ptrs[4] - ptrs[3] == 128 and go._pointers is not None
    go([FakeTensor(0xA000), FakeTensor(0xB000)])
    go([FakeTensor(0xA000), FakeTensor(0xB000)])  # same addresses: nothing re-encoded
    assert encoded == [(0xA000, (128, 64), "A"), (0xB000, (64, 64), "B")]
    assert ctypes.string_at(ptrs[3], 128) == bytes([1] * 128)
    assert ctypes.string_at(ptrs[4], 128) == bytes([2] * 128)
    go([FakeTensor(0xA000), FakeTensor(0xC000)])  # B moved: only its map is encoded again
    assert encoded[2:] == [(0xC000, (64, 64), "B")]
    assert ctypes.string_at(ptrs[4], 128) == bytes([3] * 128)
    assert _slot(go.params, 0, ctypes.c_uint64) == 0xA000 and _slot(go.params, 1, ctypes.c_uint64) == 0xC000


def test_grid_expressions_round_trip_through_json():
    r = render_cuda(mma_module())
    grid = [grid_from_json(json.loads(json.dumps(grid_to_json(g)))) for g in r.grid]
    for n in (1, 16, 33, 1000):
        assert [host_int(g, {"N": n}) for g in grid] == [host_int(g, {"N": n}) for g in r.grid]


def test_the_cache_entry_rebuilds_the_same_artifact():
    r = render_cuda(mma_module())
    art = CudaArtifact(r, "sm_90a", eager=False, cubins={"sm_90a": b"\x7fELF fake"})
    meta, blobs = art.cache_entry()
    back = CudaArtifact.from_cache_entry(json.loads(json.dumps(meta)), blobs)
    assert back.source == art.source and back.rendered.entry == r.entry
    assert back.rendered.params == r.params
    assert back.rendered.block == r.block and back.rendered.smem_bytes == r.smem_bytes
    assert back.cubin("sm_90a") == b"\x7fELF fake"
    blobs["cubin:sm_90a"] = b"garbage"
    assert CudaArtifact.from_cache_entry(meta, blobs) is None  # not a cubin: rebuilt


def test_a_cuda_compile_hit_skips_lowering_and_rendering(tmp_path, monkeypatch):
    """Source generation only (no GPU needed): the second process renders nothing."""
    env = dict(os.environ, TILECORE_CACHE_DIR=str(tmp_path))
    code = (f"import sys, json; sys.path.insert(0, {EXAMPLES!r}); import tilecore, elementwise_add; "
            "import tilecore.passes.pipeline as c; runs = []; run = c.run_pipeline; "
            "c.run_pipeline = lambda *a: runs.append(1) or run(*a); "
            "k = tilecore.jit(elementwise_add.program(), out_idx=[-1], target='cuda:sm_90a'); "
            "print(json.dumps({'rendered': 'tilecore_cuda.render' in sys.modules, "
            "'lowered': bool(runs), 'src': len(k.get_kernel_source())}))")
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                      text=True, check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert runs[0]["rendered"] and runs[0]["lowered"]
    assert not runs[1]["rendered"] and not runs[1]["lowered"] and runs[1]["src"] == runs[0]["src"]


def test_a_cubin_compiled_after_the_build_joins_the_entry(tmp_path, monkeypatch):
    """A kernel built where no GPU is visible (an autotuning worker) has no cubin in its entry;
    compiling one later rewrites the entry, so the next process loads it instead of compiling."""
    import elementwise_add
    from tilecore_cuda import build, plugin

    monkeypatch.setenv("TILECORE_CACHE_DIR", str(tmp_path))
    # the target registry (built once per process) must hold the real availability: built
    # under the patch below, the cuda target would stay "not runnable" for every later test
    tilecore.plugins.target_infos()
    monkeypatch.setattr(plugin, "_available", lambda: (False, "as in a worker: no GPU visible"))
    compile_cache.clear_memory()
    k = tilecore.jit(elementwise_add.program(), out_idx=[-1], target="cuda:sm_90a")
    assert not k.artifact._cubins  # no GPU here: compiled on first use
    monkeypatch.setattr(build, "compile_cuda", lambda *a, **kw: b"\x7fELF stand-in cubin")
    k.artifact.cubin("sm_90a")
    compile_cache.clear_memory()  # what a new process sees
    monkeypatch.setattr(build, "compile_cuda", lambda *a, **kw: 1 / 0)  # must not be called
    again = tilecore.jit(elementwise_add.program(), out_idx=[-1], target="cuda:sm_90a")
    assert again.artifact is not k.artifact and again.artifact.cubin("sm_90a") == b"\x7fELF stand-in cubin"
    compile_cache.clear_memory()


def test_target_discovery_imports_neither_torch_nor_the_driver():
    code = ("import sys, json, tilecore; t = tilecore.plugins.targets(runnable_only=True); "
            "print(json.dumps([t, 'torch' in sys.modules, 'cuda.bindings.driver' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    _, torch_loaded, driver_loaded = json.loads(out.stdout.splitlines()[-1])
    assert not torch_loaded and not driver_loaded


def test_hidden_devices_are_not_visible(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert launch.gpu_visible()[0] is False


# ----------------------------------------------------------------------------- on a GPU
@needs_gpu
def test_plans_follow_pointers_and_sizes_and_outputs_are_uninitialised(monkeypatch):
    import elementwise_add
    import torch

    k = tilecore.jit(elementwise_add.program(), out_idx=[-1], target="cuda")
    for n in (1000, 4096, 1000, 77):  # dynamic length: a plan per size, reused when it recurs
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        assert torch.equal(k(a, b), a + b)
    assert len(k._plans) == 3
    zeros = []
    monkeypatch.setattr(torch, "zeros", lambda *a, **kw: zeros.append(a) or torch.empty(*a, **kw))
    k2 = tilecore.jit(elementwise_add.program(), out_idx=[-1], target="cuda")
    k2(a, b)
    assert zeros == []


@needs_gpu
def test_a_kernel_call_is_captured_and_replayed_by_a_cuda_graph():
    import elementwise_add
    import torch

    k = tilecore.jit(elementwise_add.program(), out_idx=[-1], target="cuda")
    a, b = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up (plan, module load) outside the capture
        k(a, b)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = k(a, b)
    for _ in range(3):
        a.copy_(torch.randn(4096, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(c, a + b)


@needs_gpu
def test_a_new_process_hit_loads_the_cubin_and_runs(tmp_path):
    env = dict(os.environ, TILECORE_CACHE_DIR=str(tmp_path))
    code = (f"import sys, json, torch; sys.path.insert(0, {EXAMPLES!r}); import tilecore, elementwise_add; "
            "a = torch.randn(3000, device='cuda'); "
            "k = tilecore.jit(elementwise_add.program(), out_idx=[-1], target='cuda'); "
            "ok = bool(torch.equal(k(a, a), a + a)); "
            "print(json.dumps({'ok': ok, 'rendered': 'tilecore_cuda.render' in sys.modules}))")
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                      text=True, check=True).stdout.splitlines()[-1]) for _ in range(2)]
    assert runs == [{"ok": True, "rendered": True}, {"ok": True, "rendered": False}]
    compile_cache.clear_memory()


@needs_gpu
def test_numpy_inputs_still_round_trip():
    import elementwise_add

    k = tilecore.jit(elementwise_add.program(), out_idx=[-1], target="cuda")
    a, b = elementwise_add.make_inputs(np.random.default_rng(1), n=3000)
    np.testing.assert_array_equal(k(a, b), a + b)
