"""The object `tile_build` returns for a hip target: source, code object, and `run` on tensors."""

from __future__ import annotations

from tilecore.codegen.spec import RenderedKernel, host_int
from tilecore.errors import TileCallError, TileTargetError, caller_loc

from . import build


class HipArtifact:
    """A rendered HIP kernel for one gfx arch.

    `source` is the HIP text (`Kernel.get_kernel_source()`); `code_object()` builds it offline
    with clang (cached), `disassembly()` and `resources()` read it; `run` loads it through the
    HIP runtime and launches on torch's current (ROCm) stream, and without an AMD GPU raises a
    TileTargetError saying why. LDS is declared statically by the renderer, so launches pass 0
    bytes of dynamic shared memory.
    """

    array_api = "torch"

    def __init__(self, rendered: RenderedKernel, arch: str):
        self.rendered = rendered
        self.source = rendered.source
        self.arch = arch
        self._module = None
        self._grids: dict[tuple, tuple] = {}

    @property
    def device(self):
        """The torch device outputs are allocated on (ROCm torch names HIP devices "cuda")."""
        self._require_device()
        import torch

        return torch.device("cuda", torch.cuda.current_device())

    def _require_device(self) -> None:
        """A TileTargetError saying why this machine cannot run the kernel, if it cannot."""
        from .plugin import available

        ok, why = available()
        if not ok:
            raise TileTargetError(f"cannot run the hip:{self.arch} kernel {self.rendered.entry}: {why}",
                                  hint=f"the kernel compiles offline (get_kernel_source(), code_object()); "
                                       f"to execute it here use target='emu:hip:{self.arch}'")

    def code_object(self) -> bytes:
        """The AMDGPU code object (raw ELF) for `arch`."""
        return build.compile_hip(self.source, self.arch, name=self.rendered.entry)

    def disassembly(self) -> str:
        """llvm-objdump's disassembly of the code object."""
        return build.disassemble(self.code_object(), self.arch)

    def resources(self) -> dict[str, int]:
        """VGPR/AGPR/SGPR counts, LDS and scratch bytes from the code object's notes."""
        return build.resources(self.code_object())

    def launch_grid(self, dyn: dict) -> tuple:
        """The grid (blocks per axis) for symbolic sizes `dyn`."""
        key = tuple(sorted(dyn.items()))
        grid = self._grids.get(key)
        if grid is None:
            grid = self._grids[key] = tuple(host_int(g, dyn) for g in self.rendered.grid)
        return grid

    def run(self, args: list, dyn: dict) -> None:
        """Launch once on `args` (tensors in parameter order) with symbolic sizes `dyn`."""
        from .runtime import HipModule

        self._require_device()
        import torch

        specs = self.rendered.params
        tensors = [a for a, s in zip(args, specs) if s.is_pointer]
        for t in tensors:
            if t.device.type != "cuda":
                raise TileCallError(f"the hip target needs GPU tensors, got a tensor on {t.device}",
                                    caller_loc(), hint="move inputs with .cuda() (ROCm torch)")
        if self._module is None:
            self._module = HipModule(self.code_object(), self.rendered.entry)
        stream = torch.cuda.current_stream().cuda_stream
        self._module.launch(self.launch_grid(dyn), self.rendered.block, self.launch_values(args, dyn),
                            specs, stream)

    def launch_values(self, args: list, dyn: dict) -> list[int]:
        """The kernel's arguments in order: device addresses of `args` (anything with
        `data_ptr()`), then the symbolic sizes from `dyn`."""
        specs = self.rendered.params
        return [a.data_ptr() for a in args] + [int(dyn[s.name]) for s in specs[len(args):]]
