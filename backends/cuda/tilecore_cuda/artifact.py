"""The object `tile_build` returns for a cuda target: source, cubin(s), and `run` on tensors."""

from __future__ import annotations

from tilecore.codegen.spec import RenderedKernel, host_int
from tilecore.errors import TileCallError, caller_loc

from . import build
from .launch import LoadedKernel, ParamSpec, device_arch
from .tensormap import launch_params


def binary_compatible(cubin_arch: str, device: str) -> bool:
    """Whether machine code for `cubin_arch` runs on a `device` arch (same major, not newer minor;
    an arch-specific `a` cubin only on exactly its own arch)."""
    if cubin_arch.endswith("a") or device.endswith("a"):
        return cubin_arch.removesuffix("a") == device.removesuffix("a") and (
            not cubin_arch.endswith("a") or device.endswith("a"))
    c, d = int(cubin_arch[3:]), int(device[3:])
    return c // 10 == d // 10 and c % 10 <= d % 10


class CudaArtifact:
    """A rendered CUDA kernel; compiles per device arch on first use and launches via the driver.

    `source` is the CUDA C++ text (what `Kernel.get_kernel_source()` shows); `array_api` is torch.
    """

    array_api = "torch"

    def __init__(self, rendered: RenderedKernel, arch: str | None, eager: bool, tensor_maps: tuple = ()):
        self.rendered = rendered
        self.tensor_maps = tensor_maps  # TMA tensor-map parameters (tensormap.py), built per launch
        self.source = rendered.source
        self.arch = arch
        self._loaded: dict[str, LoadedKernel] = {}
        self._by_device: dict[int, LoadedKernel] = {}  # device index -> kernel for its arch
        self._grids: dict[tuple, tuple] = {}  # symbolic sizes -> launch grid (host_int is slow)
        self._specs = tuple(ParamSpec(p.name, p.dtype, p.is_pointer) for p in rendered.params)
        if eager and arch is not None:
            # Compile now so a codegen bug surfaces at jit time, and the cubin is cached.
            self._kernel(arch)

    @property
    def device(self):
        """The torch device outputs are allocated on: the current CUDA device."""
        import torch

        return torch.device("cuda", torch.cuda.current_device())

    def cubin(self, arch: str) -> bytes:
        """The cubin for `arch` (compiled, or from the on-disk cache)."""
        return build.compile_cuda(self.source, arch, name=self.rendered.entry)

    def _kernel(self, arch: str) -> LoadedKernel:
        k = self._loaded.get(arch)
        if k is None:
            k = LoadedKernel(self.cubin(arch), self.rendered.entry, self.rendered.smem_bytes)
            self._loaded[arch] = k
        return k

    def run(self, args: list, dyn: dict) -> None:
        """Launch once on `args` (tensors in parameter order) with symbolic sizes `dyn`."""
        r = self.rendered
        tensors = [a for a, s in zip(args, self._specs[:len(args)]) if s.is_pointer]
        dev = tensors[0].device if tensors else self.device
        if dev.type != "cuda":
            raise TileCallError(f"the cuda target needs CUDA tensors, got a tensor on {dev}",
                                caller_loc(), hint="move inputs with .cuda()")
        index = dev.index if dev.index is not None else 0
        kernel = self._by_device.get(index)
        if kernel is None:
            arch = device_arch(index)
            use = self.arch if self.arch is not None and binary_compatible(self.arch, arch) else arch
            kernel = self._by_device[index] = self._kernel(use)
        params = list(args) + [int(dyn[s.name]) for s in self._specs[len(args):]]
        key = tuple(sorted(dyn.items()))
        grid = self._grids.get(key)
        if grid is None:
            grid = self._grids[key] = tuple(host_int(g, dyn) for g in r.grid)
        extra = launch_params(self.tensor_maps, args, [p.name for p in r.params]) if self.tensor_maps else ()
        kernel.launch(grid, r.block, params, self._specs, extra)
