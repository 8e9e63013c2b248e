"""A tensor-parallel MLP block, Y = gelu(X @ W1 + b1) @ W2, whose GEMMs are tilecore kernels.

The two weight matrices are split Megatron-style over `world` ranks: W1 (and b1) by columns, so
each rank computes its slice of the hidden activation with no communication (the fused
`gemm_bias_gelu` kernel), and W2 by rows, so each rank's down-projection (the `gemm` kernel,
accumulated and written in fp32) is a partial sum of Y that one all-reduce completes. tilecore
builds no communication layer of its own: the all-reduce is torch.distributed's.

Run:  torchrun --nproc-per-node=2 examples/tensor_parallel_mlp.py [target]
      python examples/tensor_parallel_mlp.py [target] [world]     (spawns the ranks itself)

The target defaults to `cuda` when a GPU is visible, else `cpu`. Ranks talk through NCCL when
every rank has a GPU of its own, else through gloo (which all-reduces CUDA tensors too, so two
ranks can share one GPU for a check). Each rank checks its result against the unsplit block
computed on its own device (world size 1, the same kernels) and against a float64 NumPy
reference.
"""

from __future__ import annotations

import os
import socket
import sys

import numpy as np

import tilecore
from tilecore.target import Target

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm  # noqa: E402  (the examples beside this one)
import gemm_bias_gelu  # noqa: E402

# Partial sums are added in another order than the unsplit product's, and the fp16 hidden
# activation rounds differently at the shard boundaries: tolerance, not exactness.
TOLERANCE = dict(rtol=2e-2, atol=2e-2)
SIZES = dict(tokens=256, hidden=512, ffn=1024)


class TensorParallelMLP:
    """The kernels of one rank: `up` (its W1 column slice, bias and GELU fused) and `down` (its
    W2 row slice, fp32 output); calling it runs both and all-reduces the partial sums."""

    def __init__(self, tokens: int, hidden: int, ffn: int, world: int, target: str):
        if ffn % world:
            raise ValueError(f"the FFN width {ffn} does not split over {world} ranks")
        shard = ffn // world
        self.world = world
        self.up = tilecore.jit(gemm_bias_gelu.program(M=tokens, N=shard, K=hidden),
                               out_idx=gemm_bias_gelu.OUT_IDX, target=target)
        self.down = tilecore.jit(gemm.program(M=tokens, N=hidden, K=shard, block_M=64, block_N=64,
                                              out_dtype="float32"),
                                 out_idx=gemm.OUT_IDX, target=target)

    def __call__(self, x, w1, b1, w2, group=None):
        """Y for this rank's weight slices (summed over the group's ranks when world > 1)."""
        import torch.distributed as dist

        h = self.up(x, w1, b1)
        y = self.down(h, w2)
        if self.world > 1:
            dist.all_reduce(y, group=group)
        return y


def make_weights(seed: int, tokens: int, hidden: int, ffn: int):
    """X, W1, b1, W2 as fp16 NumPy arrays, scaled so activations stay O(1)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((tokens, hidden)).astype(np.float16)
    w1 = (rng.standard_normal((hidden, ffn)) / np.sqrt(hidden)).astype(np.float16)
    b1 = (0.1 * rng.standard_normal(ffn)).astype(np.float16)
    w2 = (rng.standard_normal((ffn, hidden)) / np.sqrt(ffn)).astype(np.float16)
    return x, w1, b1, w2


def shard(w1, b1, w2, rank: int, world: int):
    """This rank's slices: W1 and b1 by columns, W2 by rows."""
    s = w1.shape[1] // world
    cols = slice(rank * s, (rank + 1) * s)
    return w1[:, cols], b1[cols], w2[cols, :]


def reference(x, w1, b1, w2) -> np.ndarray:
    """The block in float64 (the fp16 rounding of the hidden activation included)."""
    from math import erf

    h = x.astype(np.float64) @ w1.astype(np.float64) + b1.astype(np.float64)
    h = 0.5 * h * (1.0 + np.vectorize(erf)(h / np.sqrt(2.0)))
    return h.astype(np.float16).astype(np.float64) @ w2.astype(np.float64)


def default_target() -> str:
    """`cuda` when torch sees a GPU, else `cpu`."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_rank(rank: int, world: int, target: str, out_path: str | None = None, seed: int = 0,
             sizes: dict | None = None) -> float:
    """One rank's work (the torchrun entry and the spawned worker): the split block, checked
    against the unsplit block on the same device and against NumPy; returns the largest error
    against the unsplit block. Rank 0 saves Y, the unsplit Y and the reference to `out_path`."""
    import torch
    import torch.distributed as dist

    sizes = sizes or SIZES
    on_gpu = runs_on_cuda(target)
    devices = torch.cuda.device_count() if on_gpu else 0
    backend = "nccl" if on_gpu and devices >= world else "gloo"
    if on_gpu:
        torch.cuda.set_device(rank % devices)
    device = torch.device(f"cuda:{rank % devices}") if on_gpu else torch.device("cpu")
    dist.init_process_group(backend, rank=rank, world_size=world)
    try:
        x, w1, b1, w2 = make_weights(seed, **sizes)
        tp = TensorParallelMLP(**sizes, world=world, target=target)
        mine = (x, *shard(w1, b1, w2, rank, world))
        parts = [torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in mine]
        y = tp(*parts).cpu().numpy()
        full = TensorParallelMLP(**sizes, world=1, target=target)
        y1 = full(*[torch.from_numpy(a).to(device) for a in (x, w1, b1, w2)]).cpu().numpy()
        ref = reference(x, w1, b1, w2)
        np.testing.assert_allclose(y, y1, **TOLERANCE)
        np.testing.assert_allclose(y, ref, **TOLERANCE)
        err = float(np.max(np.abs(y.astype(np.float64) - y1)))
        if rank == 0 and out_path:
            np.savez(out_path, y=y, y1=y1, ref=ref)
        print(f"rank {rank}/{world} on {device} ({backend}, target {target}): "
              f"max |split - unsplit| = {err:.3g}")
        return err
    finally:
        dist.destroy_process_group()


def runs_on_cuda(target: str) -> bool:
    """Whether `target`'s kernels run on a CUDA device (and so take CUDA tensors)."""
    return Target.parse(target).kind == "cuda"


def free_port() -> int:
    """A TCP port on localhost nobody listens on (for the rendezvous of spawned ranks)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawned(rank: int, world: int, target: str, out_path: str | None, seed: int, sizes: dict) -> None:
    run_rank(rank, world, target, out_path, seed, sizes)


def spawn(world: int, target: str, out_path: str | None = None, seed: int = 0,
          sizes: dict | None = None) -> None:
    """Run `world` ranks as spawned processes on this machine (what torchrun would start)."""
    import torch.multiprocessing as mp

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(free_port())
    mp.spawn(_spawned, args=(world, target, out_path, seed, sizes or SIZES), nprocs=world, join=True)


def main(target: str | None = None, world: str | None = None) -> None:
    target = target or default_target()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        run_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), target)
        return
    spawn(int(world or 2), target)
    print(f"tensor-parallel MLP {SIZES} on {target}: OK")


if __name__ == "__main__":
    main(*sys.argv[1:])
