"""Where the mma.sync GEMM's time goes on this GPU, by ablation (timing only: the ablated
kernels compute wrong results on purpose and are never checked or used).

    python benchmarks/sm80_probe.py [block_M block_N block_K stages threads]   # on a GPU

Lowers `examples/gemm.py` 4096^3 fp16 for sm_80 (cp.async stages, ldmatrix + mma.sync; the
cubin built for the device), checks it against torch, then times variants of its CUDA source
with one part of the k-tile loop taken out (`ablate`):

- base: the kernel as it is;
- nocopy: the steady-state cp.async copies removed (shared memory keeps the prologue's tile);
- nocopy_nobar: also the loop's __syncthreads removed (ldmatrix + mma.sync only);
- hmma: also the loop's ldmatrix removed (mma.sync on the fragments of the prologue only);
- nobar: only the loop's __syncthreads removed (copies and ldmatrix stay: what the per-tile
  barrier's drain costs with the copies in);
- noldsm: only the loop's ldmatrix removed (copies and barrier stay: if this gains about what
  nocopy gains, the copies and ldmatrix contend for the shared-memory port).

and a microbenchmark of mma.sync m16n8k16 (f16 in, f32 accumulate) from registers alone at
4 to 16 warps per multiprocessor (`PEAK_SOURCE`): the instruction's ceiling on this GPU.
`PROBE_POWER=1`: instead, the SM clock and board power (nvidia-smi, every 50 ms) while
torch.matmul, the base kernel and two ablations each run back to back for 2 s.
`PROBE_L2=1`: instead, the L2 -> SM rate of cp.async alone (`L2_SOURCE`: every block copies
48 KB tiles, the GEMM's 128x256x64 A + B, from a 33 MB L2-resident working set into two shared
stages, one group in flight behind the one it waits for): the ceiling of the copies the ablations
price (the GEMM needs 4.9 TB/s at 420 TFLOP/s, 6 TB/s at 0.70x of cuBLAS).
`PROBE_NCU_ONLY=1`: only the check and three launches (for `ncu -k gemm -c 1`,
tools/sm80_probe.sh).
"""

from __future__ import annotations

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import gemm  # noqa: E402
import gpu  # noqa: E402

import tilecore  # noqa: E402

_LOOP = re.compile(r"\n  for \(int k = 0; k < \d+; k\+\+\) \{\n")


def _loop_span(src: str) -> tuple[int, int]:
    """(start, end) of the k-tile loop's body in the generated source (the first top-level
    `for (int k ...` loop; its closing brace is the first line that is exactly '  }')."""
    m = _LOOP.search(src)
    if m is None:
        raise RuntimeError("k-tile loop not found in the generated source")
    end = src.index("\n  }\n", m.end())
    return m.end(), end


def ablate(src: str, name: str) -> str:
    """The source with the parts `name` names taken out of the k-tile loop."""
    if name == "base":
        return src
    a, b = _loop_span(src)
    body = src[a:b].split("\n")
    drop_copy = name in ("nocopy", "nocopy_nobar", "hmma")
    drop_bar = name in ("nocopy_nobar", "hmma", "nobar")
    drop_ldsm = name in ("hmma", "noldsm")
    out, skip = [], 0
    for line in body:
        if skip:  # the continuation lines of a dropped multi-line asm statement
            skip -= 1
            continue
        s = line.strip()
        if drop_copy and "cp.async.cg.shared.global" in s:
            continue
        if drop_bar and s.startswith("__syncthreads()"):
            continue
        if drop_ldsm and s.startswith('asm volatile("ldmatrix'):
            skip = 2
            continue
        out.append(line)
    return src[:a] + "\n".join(out) + src[b:]


PEAK_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(WARPS * 32) peak(float* out, int iters) {
  unsigned a0 = threadIdx.x, a1 = a0 * 3u, a2 = a0 * 5u, a3 = a0 * 7u, b0 = a0 ^ 9u, b1 = a0 ^ 13u;
  float acc[NACC][4];
  #pragma unroll
  for (int i = 0; i < NACC; i++) { acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f; }
  for (int it = 0; it < iters; it++) {
    #pragma unroll
    for (int i = 0; i < NACC; i++) {
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                   "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(acc[i][0]), "+f"(acc[i][1]), "+f"(acc[i][2]), "+f"(acc[i][3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0.f;
  #pragma unroll
  for (int i = 0; i < NACC; i++) s += acc[i][0] + acc[i][1] + acc[i][2] + acc[i][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


L2_SOURCE = r"""
// TILE uint4 (16-byte) chunks per tile; 256 threads; two stages of TILE chunks in shared memory
extern "C" __global__ void __launch_bounds__(256) l2copy(const uint4* __restrict__ src, int iters,
                                                          unsigned tiles, float* out) {
  extern __shared__ __align__(16) uint4 stage[];
  const unsigned s0 = (unsigned)__cvta_generic_to_shared(stage);
  for (int it = 0; it < iters; it++) {
    const unsigned tile = (blockIdx.x + (unsigned)it * gridDim.x) % tiles;
    const uint4* g = src + (size_t)tile * TILE;
    const unsigned s = s0 + (unsigned)((it & 1) * TILE * 16);
    #pragma unroll
    for (int i = 0; i < TILE / 256; i++) {
      const int j = i * 256 + threadIdx.x;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s + j * 16), "l"(g + j));
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 1;" ::: "memory");
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] = __int_as_float(stage[blockIdx.x % TILE].x);
}
"""


def l2_rate(torch, arch: str, blocks: int, tile_bytes: int = 49152, set_bytes: int = 33 << 20) -> float:
    """TB/s of cp.async L2 -> shared traffic with `blocks` blocks of 256 threads (L2_SOURCE)."""
    import ctypes

    from tilecore_cuda.build import compile_cuda
    from tilecore_cuda.launch import LoadedKernel, _driver, check

    chunks = tile_bytes // 16
    tiles = set_bytes // tile_bytes
    src_t = torch.randint(0, 1 << 30, (tiles * chunks * 4,), device="cuda", dtype=torch.int32)
    out = torch.empty(blocks, device="cuda", dtype=torch.float32)
    smem = 2 * tile_bytes
    cubin = compile_cuda(L2_SOURCE.replace("TILE", str(chunks)), arch, name="l2copy")
    k = LoadedKernel(cubin, "l2copy", smem)
    f = k.function(torch.cuda.current_device())
    iters = 256
    args = [ctypes.c_void_p(src_t.data_ptr()), ctypes.c_int(iters), ctypes.c_uint(tiles),
            ctypes.c_void_p(out.data_ptr())]
    ptrs = (ctypes.c_void_p * 4)(*[ctypes.addressof(a) for a in args])
    driver = _driver()

    def run():
        check(driver.cuLaunchKernel(f, blocks, 1, 1, 256, 1, 1, smem,
                                    driver.CUstream(torch.cuda.current_stream().cuda_stream),
                                    ctypes.addressof(ptrs), 0), "cuLaunchKernel")

    ms = gpu.bench(run)
    return blocks * iters * tile_bytes / ms / 1e9


def peak(torch, warps: int, nacc: int, sms: int, arch: str) -> float:
    """mma.sync m16n8k16 TFLOP/s with `warps` warps per block, one block per multiprocessor
    (the grid is the multiprocessor count), `nacc` independent accumulators per warp."""
    from tilecore_cuda.build import compile_cuda
    from tilecore_cuda.launch import LoadedKernel

    src = PEAK_SOURCE.replace("WARPS", str(warps)).replace("NACC", str(nacc))
    k = LoadedKernel(compile_cuda(src, arch, name=f"peak{warps}_{nacc}"), "peak", 0)
    out = torch.empty(sms * warps * 32, device="cuda", dtype=torch.float32)
    iters = 4096
    f = k.function(torch.cuda.current_device())
    import ctypes

    from tilecore_cuda.launch import _driver, check
    driver = _driver()
    p_out = ctypes.c_void_p(out.data_ptr())
    p_it = ctypes.c_int(iters)
    ptrs = (ctypes.c_void_p * 2)(ctypes.addressof(p_out), ctypes.addressof(p_it))

    def run():
        check(driver.cuLaunchKernel(f, sms, 1, 1, warps * 32, 1, 1, 0,
                                    driver.CUstream(torch.cuda.current_stream().cuda_stream),
                                    ctypes.addressof(ptrs), 0), "cuLaunchKernel")

    ms = gpu.bench(run)
    flops = 2.0 * 16 * 8 * 16 * nacc * iters * warps * sms
    return flops / ms / 1e9


def power(torch, kern, r, art, grid, dev, arch, a, b, c) -> int:
    """SM clock and board power while each of torch.matmul, the base kernel and two ablations
    runs back to back for ~2 s (nvidia-smi sampled every 50 ms): whether the kernels differ in
    clock (a power limit) rather than in cycles."""
    import statistics
    import subprocess
    import time

    from tilecore_cuda.build import compile_cuda
    from tilecore_cuda.launch import LoadedKernel

    runs = {"torch.matmul": lambda: torch.matmul(a, b)}
    for name in ("base", "nocopy", "hmma"):
        cubin = compile_cuda(ablate(r.source, name), arch, name=f"gemm_{name}")
        launch = LoadedKernel(cubin, r.entry, r.smem_bytes).prepare(dev, grid, r.block, art._specs, {})
        runs[name] = lambda launch=launch: launch([a, b, c])
    for name, fn in runs.items():
        fn()
        torch.cuda.synchronize()
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                                "--format=csv,noheader,nounits", "-lms", "50"],
                               stdout=subprocess.PIPE, text=True)
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 2.0:
            for _ in range(50):
                fn()
            n += 50
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        smi.terminate()
        rows = [ln.split(",") for ln in smi.communicate()[0].splitlines() if ln.count(",") == 1]
        clk = [float(x) for x, _ in rows[len(rows) // 4:]]  # past the ramp
        pw = [float(y) for _, y in rows[len(rows) // 4:]]
        ms = dt / n * 1e3
        print(f"power {name}: {ms:.4f} ms/iter {2.0 * 4096 ** 3 / ms / 1e9:.0f} TFLOP/s, SM clock median "
              f"{statistics.median(clk):.0f} MHz (min {min(clk):.0f}), power median "
              f"{statistics.median(pw):.0f} W ({len(clk)} samples)", flush=True)
    return 0


def main(argv=None) -> int:
    """Check the base kernel, time it and its ablations, then the mma.sync peak."""
    import torch
    from tilecore_cuda.build import compile_cuda
    from tilecore_cuda.launch import LoadedKernel, device_arch

    args = [int(a) for a in (argv if argv is not None else sys.argv[1:])]
    bm, bn, bk, st, th = args if args else (128, 256, 64, 2, 256)
    arch = device_arch(torch.cuda.current_device())
    n = 4096
    cfg = dict(block_M=bm, block_N=bn, block_K=bk, num_stages=st, threads=th)
    kern = tilecore.compile(gemm.program(M=n, N=n, K=n, dtype="float16", **cfg), target="cuda:sm_80")
    a, b = (torch.randn(n, n, device="cuda", dtype=torch.float16) for _ in range(2))
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    ref = torch.matmul(a.float(), b.float())
    err = gpu.rel_err((kern(a, b, c), c)[1], ref)
    flops = 2.0 * n ** 3
    art = kern.artifact
    r = art.rendered
    grid = art._grid({})
    dev = torch.cuda.current_device()
    print(f"config {cfg}: grid {grid} block {r.block} smem {r.smem_bytes} err {err:.2e}", flush=True)
    t_torch = gpu.bench(lambda: torch.matmul(a, b))
    print(f"torch.matmul: {t_torch:.4f} ms {flops / t_torch / 1e9:.0f} TFLOP/s", flush=True)
    if os.environ.get("PROBE_L2"):
        sms = torch.cuda.get_device_properties(dev).multi_processor_count
        for blocks in (sms, 2 * sms):
            print(f"cp.async L2 -> shared, 48 KB tiles, {blocks} blocks of 256 threads: "
                  f"{l2_rate(torch, arch, blocks):.2f} TB/s", flush=True)
        return 0
    if os.environ.get("PROBE_POWER"):
        return power(torch, kern, r, art, grid, dev, arch, a, b, c)
    if os.environ.get("PROBE_NCU_ONLY"):
        for _ in range(3):
            kern(a, b, c)
        torch.cuda.synchronize()
        return 0
    for name in ("base", "nocopy", "nocopy_nobar", "hmma", "nobar", "noldsm"):
        src = ablate(r.source, name)
        lk = LoadedKernel(compile_cuda(src, arch, name=f"gemm_{name}"), r.entry, r.smem_bytes)
        launch = lk.prepare(dev, grid, r.block, art._specs, {})
        ms = gpu.bench(lambda launch=launch: launch([a, b, c]))
        print(f"ablate {bm}x{bn}x{bk} s{st} t{th} {name}: {ms:.4f} ms {flops / ms / 1e9:.0f} TFLOP/s",
              flush=True)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    for warps, nacc in ((4, 32), (8, 32), (8, 16), (12, 16), (16, 8)):
        print(f"peak mma.sync m16n8k16 f32acc, {warps} warps/SM, {nacc} acc/warp: "
              f"{peak(torch, warps, nacc, sms, arch):.0f} TFLOP/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
