"""Running TVM's WGSL with `wgpu` (wgpu-native; on a machine without a GPU, Mesa's lavapipe
Vulkan driver runs it on the CPU), and validating WGSL with naga (`create_shader_module`).

The binding layout is read from the WGSL TVM generated, not assumed: each storage binding is
named `<parameter>_ptr` (the lowering names every TIR buffer after its tilecore parameter),
and the trailing uniform `PODArgs` struct holds the scalar parameters by name, then
`packGridDimX`, against which TVM's kernel culls workgroups (`id > packGridDimX` returns), so
it is set to the last block's index and the grid may be dispatched in several rows of at most
65535 workgroups.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile

import numpy as np

from tilecore.codegen.spec import host_int
from tilecore.errors import TileTargetError

from .lower import _split_top

MAX_X = 65535
_BINDING = re.compile(r"@group\(0\) @binding\((\d+)\) var<(storage|uniform)(?:, (read|read_write))?> (\w+)")
_POD = re.compile(r"struct PODArgs \{([^}]*)\}")
_ENTRY = re.compile(r"@compute[^\n]*\n\s*fn (\w+)\(")
_DEVICE: dict = {}


def _quiet_env() -> None:
    # wgpu-native's Vulkan loader warns when XDG_RUNTIME_DIR is unset (harmless, but noisy)
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.gettempdir())


def adapter_reason() -> str | None:
    """None when a WebGPU adapter can be had here, else why not."""
    try:
        device()
    except Exception as e:  # noqa: BLE001 - any failure means the target cannot run here
        return f"no WebGPU adapter: {e} (install wgpu and a Vulkan driver, e.g. mesa-vulkan-drivers)"
    return None


def device():
    """The process-wide wgpu device (shader-f16 requested when the adapter has it)."""
    if "device" in _DEVICE:
        return _DEVICE["device"]
    if "error" in _DEVICE:
        raise _DEVICE["error"]
    _quiet_env()
    try:
        import wgpu

        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
        if adapter is None:
            raise RuntimeError("wgpu found no adapter")
        feats = [f for f in ("shader-f16",) if f in adapter.features]
        dev = adapter.request_device_sync(required_features=feats)
    except Exception as e:
        _DEVICE["error"] = e
        raise
    _DEVICE["device"] = dev
    _DEVICE["info"] = dict(adapter.info)
    return dev


def adapter_info() -> dict:
    """The adapter's description (vendor, device, backend), e.g. lavapipe's."""
    device()
    return _DEVICE["info"]


def validate(wgsl: str):
    """Compile `wgsl` with naga; raises `wgpu.GPUValidationError` with a located message."""
    return device().create_shader_module(code=wgsl)


class WebGpuRunner:
    """Runs one compiled kernel's WGSL on NumPy arrays."""

    def __init__(self, art):
        import wgpu

        self.func = art.func
        src = art.source
        m = _ENTRY.search(src)
        if m is None:
            raise TileTargetError("TVM's WGSL has no compute entry point",
                                  hint="a lowering produced this; please report it with the kernel")
        self.entry = m.group(1)
        self.storage = []  # (binding, param index, writable)
        self.uniform = None
        names = {p.name: i for i, p in enumerate(self.func.params)}
        for b, kind, access, name in _BINDING.findall(src):
            if kind == "uniform":
                self.uniform = int(b)
                continue
            pname = name[:-4] if name.endswith("_ptr") else name
            if pname not in names:
                raise TileTargetError(f"WGSL binding {name} names no parameter of {self.func.name}",
                                      hint="a lowering produced this; please report it with the kernel")
            self.storage.append((int(b), names[pname], access == "read_write"))
        pod = _POD.search(src)
        self.pod = [f.split(":")[0].strip() for f in pod.group(1).split(",") if f.strip()] if pod else []
        module = validate(src)
        self.pipeline = device().create_compute_pipeline(
            layout="auto", compute={"module": module, "entry_point": self.entry})
        self.usage = wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC | wgpu.BufferUsage.COPY_DST
        lets, self.launch = _split_top(self.func)
        self.lets = lets

    def _scalars(self, dyn: dict) -> dict:
        """The call's scalars and the kernel's top-level integer assignments, by name."""
        env = dict(dyn)
        for s in self.lets:
            if s.var.dtype.is_int:
                env[s.var.name] = host_int(s.value, env)
        return env

    def _blocks(self, env: dict) -> int:
        n = 1
        for g in self.launch.grid:
            n *= host_int(g, env)
        return n

    def run(self, args, dyn) -> None:
        """Upload the arguments, dispatch the grid, read the writable buffers back."""
        import wgpu

        dev = device()
        env = self._scalars(dyn)
        blocks = self._blocks(env)
        if blocks <= 0:
            return
        entries, back = [], []
        for binding, i, writable in self.storage:
            a = np.ascontiguousarray(args[i])
            data = a.tobytes()
            data += b"\0" * (-len(data) % 4 or (4 if not data else 0))
            buf = dev.create_buffer_with_data(data=data, usage=self.usage)
            entries.append({"binding": binding, "resource": {"buffer": buf, "offset": 0, "size": buf.size}})
            if writable:
                back.append((args[i], buf))
        if self.uniform is not None:
            values = []
            for name in self.pod:
                values.append(struct.pack("<I", blocks - 1) if name == "packGridDimX"
                              else struct.pack("<i", int(env[name])))
            data = b"".join(values)
            data += b"\0" * (-len(data) % 16)
            ub = dev.create_buffer_with_data(data=data, usage=wgpu.BufferUsage.UNIFORM)
            entries.append({"binding": self.uniform,
                            "resource": {"buffer": ub, "offset": 0, "size": ub.size}})
        group = dev.create_bind_group(layout=self.pipeline.get_bind_group_layout(0), entries=entries)
        enc = dev.create_command_encoder()
        cp = enc.begin_compute_pass()
        cp.set_pipeline(self.pipeline)
        cp.set_bind_group(0, group)
        x = min(blocks, MAX_X)
        cp.dispatch_workgroups(x, 1, -(-blocks // x))
        cp.end()
        dev.queue.submit([enc.finish()])
        for arr, buf in back:
            raw = np.frombuffer(dev.queue.read_buffer(buf), dtype=np.uint8)[: arr.nbytes]
            arr[...] = raw.view(arr.dtype).reshape(arr.shape)
