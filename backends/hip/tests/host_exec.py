"""Execute generated HIP source on the CPU: a test harness, not a target.

The rendered kernel text (prelude helpers, index arithmetic, LDS carving, shuffles, register
packing of MFMA/WMMA operands) is compiled for the host by clang++-22 against a shim: one
std::thread per work-item, blocks one after another, `__syncthreads` as a block-wide
std::barrier, `ds_bpermute` through a per-wave exchange array, and each matrix builtin executed
from the lane maps of `tilecore_hip.intrinsics` (every lane scatters its registers into the
wave's matrices, the wave meets at a barrier, each lane computes its D elements). So the
renderer's code, not the IR, is what runs; the lane maps are the only thing shared with emu.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import mmap
import os
import signal
import subprocess
import time

import numpy as np
from tilecore_hip import build
from tilecore_hip import intrinsics as I
from tilecore_hip import prelude as P
from tilecore_hip.render import HipRenderer

from tilecore import dtypes as dt
from tilecore.codegen.spec import host_int

SHIM = r"""
#include <barrier>
#include <cstring>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __shared__ static
#define __launch_bounds__(n)
#define __HIP_MEMORY_SCOPE_AGENT 0
static thread_local int tc_tid;
static thread_local int tc_bid[3];
static int tc_wave;
static std::barrier<>* tc_block_bar;
static std::barrier<>* tc_wave_bar[1024];
static int tc_xchg[1024];
static float tc_mats[1024][3 * 32 * 32];
#define __builtin_amdgcn_workitem_id_x() ((unsigned)tc_tid)
#define __builtin_amdgcn_workgroup_id_x() ((unsigned)tc_bid[0])
#define __builtin_amdgcn_workgroup_id_y() ((unsigned)tc_bid[1])
#define __builtin_amdgcn_workgroup_id_z() ((unsigned)tc_bid[2])
#define __builtin_amdgcn_fence(order, scope) ((void)0)
#define __builtin_amdgcn_s_barrier() tc_block_bar->arrive_and_wait()
#define __builtin_amdgcn_ds_bpermute(addr, v) tc_bpermute(addr, v)
#define __builtin_amdgcn_rcpf(x) (1.0f / (x))
static void tc_wave_sync() { tc_wave_bar[tc_tid / tc_wave]->arrive_and_wait(); }
static int tc_bpermute(int addr, int v) {
  tc_xchg[tc_tid] = v;
  tc_wave_sync();
  const int r = tc_xchg[tc_tid / tc_wave * tc_wave + ((addr >> 2) & (tc_wave - 1))];
  tc_wave_sync();
  return r;
}
template <typename T, typename U> static T tc_atomic_add(T* p, U v) {
  T old = *p, want;
  do { want = (T)(old + (T)v); } while (!__atomic_compare_exchange(p, &old, &want, false,
                                                                   __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  return old;
}
#define __hip_atomic_fetch_add(p, v, order, scope) tc_atomic_add(p, v)
static float tc_f(_Float16 x) { return (float)x; }
static float tc_f(short x) {
  unsigned u = (unsigned)(unsigned short)x << 16; float f; memcpy(&f, &u, 4); return f;
}
static float tc_f(float x) { return x; }
"""


def _mma_shim(intr) -> str:
    """A host function computing `intr` from its lane maps, and the macro naming its builtin."""
    m, n, k = intr.shape
    d_spec, a_spec, b_spec, _ = intr.operands
    elem = "_Float16" if a_spec.dtype.name == "float16" else "short"
    fn = "tc_" + intr.name
    tables = []
    for spec in (a_spec, b_spec, d_spec):
        flat = ", ".join(f"{r}, {c}" for r, c in spec.map.table)
        tables.append(f"static const short {fn}_{spec.name}[] = {{{flat}}};")
    va = f"{elem} __attribute__((ext_vector_type({a_spec.elems})))"
    vd = f"float __attribute__((ext_vector_type({d_spec.elems})))"
    tail = ", x, y, z" if I.builtin_tail(intr) else ""
    return "\n".join(tables + [f"""
typedef {va} {fn}_va;
typedef {vd} {fn}_vd;
static {fn}_vd {fn}({fn}_va a, {fn}_va b, {fn}_vd c) {{
  const int lane = tc_tid % tc_wave;
  float* A = tc_mats[tc_tid / tc_wave]; float* B = A + {m * k}; float* C = B + {k * n};
  for (int e = 0; e < {a_spec.elems}; ++e) {{
    const short* ra = &{fn}_A[2 * (lane * {a_spec.elems} + e)];
    const short* rb = &{fn}_B[2 * (lane * {b_spec.elems} + e)];
    A[ra[0] * {k} + ra[1]] = tc_f(a[e]);
    B[rb[0] * {n} + rb[1]] = tc_f(b[e]);
  }}
  for (int e = 0; e < {d_spec.elems}; ++e) {{
    const short* rc = &{fn}_D[2 * (lane * {d_spec.elems} + e)];
    C[rc[0] * {n} + rc[1]] = c[e];
  }}
  tc_wave_sync();
  {fn}_vd d;
  for (int e = 0; e < {d_spec.elems}; ++e) {{
    const short* rc = &{fn}_D[2 * (lane * {d_spec.elems} + e)];
    double acc = C[rc[0] * {n} + rc[1]];
    for (int q = 0; q < {k}; ++q) acc += (double)A[rc[0] * {k} + q] * (double)B[q * {n} + rc[1]];
    d[e] = (float)acc;
  }}
  tc_wave_sync();
  return d;
}}
#define {I.builtin_name(intr)}(a, b, c{tail}) {fn}(a, b, c)"""])


def _all_matrix_shims() -> str:
    intrs = [I.mfma(s, d) for s in I.MFMA_SHAPES for d in (dt.float16, dt.bfloat16)]
    intrs += [I.wmma(d) for d in (dt.float16, dt.bfloat16)]
    return "\n".join(_mma_shim(x) for x in intrs)


def _driver(rendered) -> str:
    r = HipRenderer()
    args = []
    for i, p in enumerate(rendered.params):
        t = r.type_name(p.dtype)
        args.append(f"({t}*)args[{i}]" if p.is_pointer else f"*({t}*)args[{i}]")
    return f"""
extern "C" void tc_run(void** args, int gx, int gy, int gz, int threads, int wave) {{
  tc_wave = wave;
  for (int z = 0; z < gz; ++z) for (int y = 0; y < gy; ++y) for (int x = 0; x < gx; ++x) {{
    std::barrier<> block(threads);
    std::vector<std::barrier<>*> waves;
    tc_block_bar = &block;
    for (int w = 0; w < threads / wave; ++w) tc_wave_bar[w] = new std::barrier<>(wave);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([=] {{ tc_tid = t; tc_bid[0] = x; tc_bid[1] = y; tc_bid[2] = z;
                               {rendered.entry}({', '.join(args)}); }});
    for (auto& th : pool) th.join();
    for (int w = 0; w < threads / wave; ++w) delete tc_wave_bar[w];
  }}
}}
"""


@functools.cache
def _runtime_builtins() -> tuple[str, ...]:
    """compiler-rt's builtins archive: the host's bf16 conversions (__truncsfbf2) live there,
    not in Debian's libgcc."""
    out = subprocess.run([build.tool("clang++"), "-rtlib=compiler-rt", "-print-libgcc-file-name"],
                         capture_output=True, text=True)
    path = out.stdout.strip()
    return (path,) if out.returncode == 0 and os.path.exists(path) else ()


def host_library(rendered, cache_dir: str) -> ctypes.CDLL:
    """The rendered kernel compiled for the host with the shim and a `tc_run` driver."""
    src = rendered.source.replace(P.KEYWORDS, "")
    text = SHIM + _all_matrix_shims() + "\n" + src + _driver(rendered)
    key = hashlib.sha256(text.encode()).hexdigest()[:20]
    os.makedirs(cache_dir, exist_ok=True)
    so = os.path.join(cache_dir, f"host-{rendered.entry}-{key}.so")
    if not os.path.exists(so):
        cpp = so[:-3] + ".cpp"
        with open(cpp, "w") as f:
            f.write(text)
        subprocess.run([build.tool("clang++"), "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread",
                        "-w", cpp, "-o", so + ".part", *_runtime_builtins()], check=True,
                       capture_output=True, text=True)
        os.replace(so + ".part", so)
    return ctypes.CDLL(so)


class HostDeadlock(AssertionError):
    """The kernel stopped making progress: a barrier or shuffle reached by only some threads."""


def run_on_host(kernel, args: list, dyn: dict, wave: int, cache_dir: str, timeout_s: float = 60.0) -> None:
    """Run `kernel` (a tilecore Kernel for a hip target) on NumPy `args` in place.

    The kernel runs in a forked child on shared copies of the arrays, so a deadlock (threads
    waiting at a barrier that not all of them reach: divergent `__syncthreads` or shuffles)
    fails the test after `timeout_s` instead of hanging it."""
    rendered = kernel.artifact.rendered
    lib = host_library(rendered, cache_dir)
    shared = {}
    ptrs = (ctypes.c_void_p * len(rendered.params))()
    for i, p in enumerate(rendered.params):
        if p.is_pointer:
            a = args[i]
            buf = mmap.mmap(-1, max(1, a.nbytes))
            view = np.frombuffer(buf, dtype=a.dtype, count=a.size).reshape(a.shape)
            view[...] = a
            shared[i] = (buf, view)
            ptrs[i] = view.ctypes.data
        else:
            v = np.array([dyn[p.name]], dtype=np.int64 if p.dtype.bits == 64 else np.int32)
            shared[i] = (None, v)
            ptrs[i] = v.ctypes.data
    grid = [host_int(g, dyn) for g in rendered.grid]
    pid = os.fork()
    if pid == 0:  # the child: run, then leave without unwinding the parent's state
        try:
            lib.tc_run(ptrs, *[ctypes.c_int(g) for g in grid], ctypes.c_int(rendered.block[0]),
                       ctypes.c_int(wave))
        finally:
            os._exit(0)
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise HostDeadlock(f"{rendered.entry} made no progress in {timeout_s:.0f} s: a barrier or "
                               "shuffle reached by only some threads")
        time.sleep(0.01)
    if os.waitstatus_to_exitcode(status) != 0:
        raise AssertionError(f"{rendered.entry} crashed on the host (status {status})")
    for i, p in enumerate(rendered.params):
        if p.is_pointer:
            args[i][...] = shared[i][1]
