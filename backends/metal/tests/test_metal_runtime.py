"""The Apple GPU runtime (PyObjC Metal) up to needing a device: a recording stand-in for the
`Metal` module checks the API calls, argument binding and data movement. Nothing here has run on
Apple hardware (see backends/metal/README.md)."""

import numpy as np
import pytest
from tilecore_metal import runtime_apple
from tilecore_metal.runtime_apple import MetalGpuArtifact, device_or_reason

import tilecore
import tilecore.language as T
from tilecore.errors import TileTargetError


class _Buffer:
    def __init__(self, data: bytes):
        self.data = bytearray(data)

    def contents(self):
        outer = self

        class _Ptr:
            def as_buffer(self, n):
                return memoryview(outer.data)[:n]

        return _Ptr()


class _Encoder:
    def __init__(self, log):
        self.log = log
        self.bound = {}

    def setComputePipelineState_(self, p):
        self.log.append("pipeline")

    def setBuffer_offset_atIndex_(self, buf, off, i):
        self.bound[i] = buf

    def setBytes_length_atIndex_(self, data, n, i):
        self.bound[i] = np.frombuffer(data, dtype=np.int32)[0]

    def dispatchThreadgroups_threadsPerThreadgroup_(self, grid, block):
        self.log.append(("dispatch", grid, block))
        # what the kernel `B[i] = A[i] * 2` does, so the copy back can be checked
        a = np.frombuffer(self.bound[0].data, dtype=np.float32)
        n = self.bound[2]
        out = np.frombuffer(self.bound[1].data, dtype=np.float32)
        out[:n] = a[:n] * 2

    def endEncoding(self):
        self.log.append("end")


class _FakeMetal:
    """Records what the runtime asks of Metal; compiles nothing."""

    def __init__(self, device=True):
        self.log = []
        self.has_device = device
        self.sources = []
        fake = self

        class _Opts:
            def init(self):
                return self

            def setFastMathEnabled_(self, v):
                fake.log.append(("fast_math", v))

        class _OptsClass:
            @staticmethod
            def alloc():
                return _Opts()

        self.MTLCompileOptions = _OptsClass

    def MTLSizeMake(self, *xyz):
        return tuple(xyz)

    def MTLCreateSystemDefaultDevice(self):
        return self if self.has_device else None

    # the device
    def newLibraryWithSource_options_error_(self, src, opts, err):
        self.sources.append(src)
        return self, None

    def newFunctionWithName_(self, name):
        self.log.append(("function", name))
        return name

    def newComputePipelineStateWithFunction_error_(self, fn, err):
        return self, None

    def maxTotalThreadsPerThreadgroup(self):
        return 1024

    def newCommandQueue(self):
        return self

    def newBufferWithBytes_length_options_(self, data, n, opts):
        return _Buffer(data)

    # queue / command buffer
    def commandBuffer(self):
        return self

    def computeCommandEncoder(self):
        self.encoder = _Encoder(self.log)
        return self.encoder

    def commit(self):
        self.log.append("commit")

    def waitUntilCompleted(self):
        self.log.append("wait")

    def error(self):
        return None


def _double():
    n = T.dynamic("n")

    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < n:
                    B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    return double


def test_runtime_binds_buffers_and_sizes_dispatches_and_copies_back():
    kernel = tilecore.compile(_double(), out_idx=[-1], target="metal")
    art = kernel.artifact
    assert isinstance(art, MetalGpuArtifact)
    fake = _FakeMetal()
    art._metal = fake
    a = np.arange(300, dtype=np.float32)
    b = np.zeros(300, np.float32)
    art.run([a, b], {"n": 300})
    np.testing.assert_array_equal(b, a * 2)
    assert fake.sources == [art.source] and ("fast_math", False) in fake.log
    assert ("function", art.rendered.entry) in fake.log and art.rendered.entry == "double_1"
    assert ("dispatch", (3, 1, 1), (128, 1, 1)) in fake.log
    assert fake.log[-3:] == ["end", "commit", "wait"]


def test_no_device_or_no_macos_is_a_clear_error():
    dev, reason = device_or_reason(_FakeMetal(device=False))
    assert dev is None and "no device" in reason
    if runtime_apple.platform.system() != "Darwin":
        with pytest.raises(TileTargetError, match="macOS"):
            runtime_apple.import_metal()
        from tilecore import plugins

        ok, why = plugins.target_infos()["metal"].runnable()
        assert not ok and "macOS" in why
