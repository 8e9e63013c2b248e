"""The tiled GEMM of examples/gemm.py with its tile sizes chosen by @tilecore.autotune.

Each config is compiled (in worker processes for targets that build binaries), checked against
the NumPy reference, and timed through the backend; the winner is stored under
$TILECORE_CACHE_DIR/autotune, so a second run (or process) reads it and searches nothing.

Run: python examples/gemm_autotune.py [target] [M N K]
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gemm  # noqa: E402

import tilecore  # noqa: E402


def configs(M, N, K, dtype="float16"):
    """Tile sizes to try: square and rectangular tiles, two pipeline depths."""
    out = []
    for bm, bn in ((64, 64), (128, 64), (128, 128)):
        for bk, stages in ((32, 2), (32, 3), (64, 2)):
            out.append(dict(block_M=bm, block_N=bn, block_K=bk, num_stages=stages,
                            threads=128 if bm * bn <= 128 * 64 else 256))
    return out


def matmul_reference(a, b):
    """float32 accumulation, rounded to the inputs' dtype (gemm.reference as a ref_prog)."""
    from tilecore.profiler import as_numpy

    want = gemm.reference(as_numpy(a), as_numpy(b))
    if hasattr(a, "device"):  # torch tensors in, torch tensors out
        from tilecore.kernel import _from_numpy

        return _from_numpy(want).to(a.device)
    return want


def tuned_gemm(target: str, **kw):
    """The autotuned factory for `target` (keyword arguments go to tilecore.autotune)."""
    kw.setdefault("configs", configs)
    kw.setdefault("ref_prog", matmul_reference)
    return tilecore.autotune(**kw)(tilecore.jit(gemm.program, out_idx=gemm.OUT_IDX, target=target))


def main(target="cuda", M=4096, N=4096, K=4096):
    M, N, K = int(M), int(N), int(K)
    kernel = tuned_gemm(target)(M=M, N=N, K=K)
    print(f"gemm {M}x{N}x{K} on {kernel.target}: best {kernel.config} at {kernel.latency:.3f} ms")
    rng = np.random.default_rng(0)
    a, b = gemm.make_inputs(rng, M=M, N=N, K=K)
    c = kernel(a, b)
    np.testing.assert_allclose(np.asarray(c, np.float32), gemm.reference(a, b).astype(np.float32),
                               **gemm.TOLERANCE)
    return kernel


if __name__ == "__main__":
    main(*sys.argv[1:])
