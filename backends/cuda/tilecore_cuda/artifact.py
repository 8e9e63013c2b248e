"""The object `tile_build` returns for a cuda target: source, cubin(s), and `run` on tensors.

It is also what the compile cache stores (`cache_entry`) and rebuilds (`from_cache_entry`): the
launch description (entry point, grid expressions, block, shared memory, parameter layout) as
JSON, the source and the cubin as blobs; nothing is executed from the entry but the cubin,
which the driver loads exactly as on a miss.
"""

from __future__ import annotations

from tilecore import dtypes as dt
from tilecore.codegen.spec import KernelParam, RenderedKernel, host_int
from tilecore.errors import TileCallError, caller_loc
from tilecore.ir.expr import BinOp, Cast, Const, Select, Unary, Var

from .launch import GRID_WAIT, LoadedKernel, ParamSpec, device_arch
from .tensormap import TensorMapSpec, launch_params

ENTRY_FORMAT = 2  # 2: TMA tensor-map parameters in the entry


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
    `cubins` (arch -> bytes) seeds the per-arch binaries (a compile-cache hit).
    """

    array_api = "torch"

    def __init__(self, rendered: RenderedKernel, arch: str | None, eager: bool, tensor_maps: tuple = (),
                 cubins: dict[str, bytes] | None = None):
        self.rendered = rendered
        self.tensor_maps = tensor_maps  # TMA tensor-map parameters (tensormap.py), built per launch
        self.source = rendered.source
        self.arch = arch
        self._cubins: dict[str, bytes] = dict(cubins or {})
        self._loaded: dict[str, LoadedKernel] = {}
        self._by_device: dict[int, LoadedKernel] = {}  # device index -> kernel for its arch
        self._grids: dict[tuple, tuple] = {}  # symbolic sizes -> launch grid (host_int is slow)
        self._specs = tuple(ParamSpec(p.name, p.dtype, p.is_pointer) for p in rendered.params)
        if eager and arch is not None and arch not in self._cubins:
            # Compile now so a codegen bug surfaces at jit time, and the cubin is cached.
            self.cubin(arch)

    @property
    def device(self):
        """The torch device outputs are allocated on: the current CUDA device."""
        import torch

        return torch.device("cuda", torch.cuda.current_device())

    def cubin(self, arch: str) -> bytes:
        """The cubin for `arch` (compiled, or from the on-disk cache)."""
        c = self._cubins.get(arch)
        if c is None:
            from . import build  # the compilers: not imported by a compile-cache hit

            c = self._cubins[arch] = build.compile_cuda(self.source, arch, name=self.rendered.entry)
            # a kernel built where no GPU was visible (an autotuning worker) or loaded without
            # this arch: its compile-cache entry gains the cubin, so the next process loads it
            from tilecore import compile_cache

            compile_cache.update(self)
        return c

    def _kernel(self, arch: str) -> LoadedKernel:
        k = self._loaded.get(arch)
        if k is None:
            k = LoadedKernel(self.cubin(arch), self.rendered.entry, self.rendered.smem_bytes,
                             programmatic=GRID_WAIT in self.source)
            self._loaded[arch] = k
        return k

    def _device_kernel(self, index: int) -> LoadedKernel:
        kernel = self._by_device.get(index)
        if kernel is None:
            arch = device_arch(index)
            use = self.arch if self.arch is not None and binary_compatible(self.arch, arch) else arch
            kernel = self._by_device[index] = self._kernel(use)
        return kernel

    def _grid(self, dyn: dict) -> tuple:
        key = tuple(sorted(dyn.items()))
        grid = self._grids.get(key)
        if grid is None:
            grid = self._grids[key] = tuple(host_int(g, dyn) for g in self.rendered.grid)
        return grid

    def run(self, args: list, dyn: dict) -> None:
        """Launch once on `args` (tensors in parameter order) with symbolic sizes `dyn`."""
        tensors = [a for a, s in zip(args, self._specs[:len(args)]) if s.is_pointer]
        dev = tensors[0].device if tensors else self.device
        if dev.type != "cuda":
            raise TileCallError(f"the cuda target needs CUDA tensors, got a tensor on {dev}",
                                caller_loc(), hint="move inputs with .cuda()")
        index = dev.index if dev.index is not None else 0
        params = list(args) + [int(dyn[s.name]) for s in self._specs[len(args):]]
        extra = (launch_params(self.tensor_maps, args, [p.name for p in self.rendered.params])
                 if self.tensor_maps else ())
        self._device_kernel(index).launch(self._grid(dyn), self.rendered.block, params, self._specs, extra)

    def launcher(self, dyn: dict, device):
        """A function launching on every tensor argument (in parameter order) with sizes `dyn`
        on torch `device`: grid, parameter buffer and the sizes' slots prepared now, so a call
        only writes the tensors' addresses and enqueues (`tilecore_cuda.launch.Launch`)."""
        if getattr(device, "type", None) != "cuda":
            return None
        index = device.index if device.index is not None else 0
        n = sum(1 for s in self._specs if s.is_pointer)
        static = {i: int(dyn[s.name]) for i, s in enumerate(self._specs) if not s.is_pointer}
        if any(not s.is_pointer for s in self._specs[:n]):
            return None  # sizes before tensors: a layout the launcher does not prepare
        # TMA tensor maps: parameters after the sizes, re-encoded per call only when their
        # tensor's address changed (launch.tensor_map_packer)
        names = [p.name for p in self.rendered.params]
        maps = tuple(ParamSpec(names[t.param], t.dtype, False, tmap=t) for t in self.tensor_maps)
        return self._device_kernel(index).prepare(index, self._grid(dyn), self.rendered.block,
                                                  self._specs + maps, static).entry()

    # ------------------------------------------------------------------ compile cache
    def cache_entry(self):
        """(meta, blobs) for the compile cache: the launch description as JSON, the source and
        every cubin built so far as blobs (see module docstring)."""
        r = self.rendered
        grid = [grid_to_json(g) for g in r.grid]
        if any(g is None for g in grid):
            return None
        meta = {"backend": "cuda", "format": ENTRY_FORMAT, "entry": r.entry, "grid": grid,
                "block": list(r.block), "smem_bytes": r.smem_bytes, "arch": self.arch,
                "params": [[p.name, p.dtype.name, p.is_pointer] for p in r.params],
                "cubins": sorted(self._cubins),
                "tensor_maps": [[t.param, t.dtype.name, list(t.box), t.swizzle, t.l2_promotion]
                                for t in self.tensor_maps]}
        blobs = {"source": r.source.encode()}
        blobs.update({f"cubin:{a}": c for a, c in self._cubins.items()})
        return meta, blobs

    @classmethod
    def from_cache_entry(cls, meta: dict, blobs: dict[str, bytes]):
        """The artifact a `cache_entry` describes, or None when it is not a usable cuda entry."""
        if meta.get("backend") != "cuda" or meta.get("format") != ENTRY_FORMAT:
            return None
        cubins = {a: blobs[f"cubin:{a}"] for a in meta["cubins"]}
        if any(c[:4] != b"\x7fELF" for c in cubins.values()):
            return None
        params = tuple(KernelParam(n, dt.as_dtype(d), bool(ptr)) for n, d, ptr in meta["params"])
        rendered = RenderedKernel(blobs["source"].decode(), meta["entry"],
                                  tuple(grid_from_json(g) for g in meta["grid"]),
                                  tuple(int(b) for b in meta["block"]), int(meta["smem_bytes"]), params)
        # [param, dtype, box, swizzle, L2 promotion]; entries written before the promotion was
        # recorded have four fields (the 128-byte promotion they were built for)
        maps = tuple(TensorMapSpec(int(m[0]), dt.as_dtype(m[1]), tuple(int(b) for b in m[2]), int(m[3]),
                                   int(m[4]) if len(m) > 4 else 128)
                     for m in meta.get("tensor_maps", ()))
        return cls(rendered, meta["arch"], eager=False, tensor_maps=maps, cubins=cubins)


# ------------------------------------------------------------------------ launch expressions
def grid_to_json(e):
    """A launch extent (an int, or an integer expression over the symbolic sizes) as JSON, or
    None when it holds a node `host_int` cannot evaluate."""
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return ["const", e.value if not isinstance(e.value, bool) else int(e.value), e.dtype.name]
    if isinstance(e, Var):
        return ["var", e.name, e.dtype.name]
    if isinstance(e, BinOp):
        a, b = grid_to_json(e.a), grid_to_json(e.b)
        return None if a is None or b is None else ["bin", e.op, a, b, e.dtype.name]
    if isinstance(e, Unary):
        a = grid_to_json(e.a)
        return None if a is None else ["un", e.op, a, e.dtype.name]
    if isinstance(e, Cast):
        v = grid_to_json(e.value)
        return None if v is None else ["cast", v, e.dtype.name]
    if isinstance(e, Select):
        parts = [grid_to_json(x) for x in (e.cond, e.true_value, e.false_value)]
        return None if any(p is None for p in parts) else ["sel", *parts, e.dtype.name]
    return None


def grid_from_json(j):
    """The inverse of `grid_to_json` (raises KeyError/ValueError/TypeError on a bad entry)."""
    if isinstance(j, int):
        return j
    tag = j[0]
    if tag == "const":
        return Const(j[1], dt.as_dtype(j[2]))
    if tag == "var":
        return Var(j[1], dt.as_dtype(j[2]))
    if tag == "bin":
        return BinOp(j[1], grid_from_json(j[2]), grid_from_json(j[3]), dt.as_dtype(j[4]))
    if tag == "un":
        return Unary(j[1], grid_from_json(j[2]), dt.as_dtype(j[3]))
    if tag == "cast":
        return Cast(grid_from_json(j[1]), dt.as_dtype(j[2]))
    if tag == "sel":
        return Select(grid_from_json(j[1]), grid_from_json(j[2]), grid_from_json(j[3]),
                      dt.as_dtype(j[4]))
    raise ValueError(f"unknown launch-expression tag {tag!r}")
