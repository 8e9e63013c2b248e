"""The general call path of a Kernel: arguments converted to the artifact's array API (NumPy
for interp/cpu, torch for device targets) and written inputs copied back. Prepared launches
(cuda's `launcher`) never come here, so a compile-cache hit and its calls do not import it."""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from . import subbyte
from .kernel import _is_torch


def _to_numpy(t) -> np.ndarray:
    """A NumPy view of a torch CPU tensor, narrow floats included (viewed through ints)."""
    import torch

    t = t.detach()  # a kernel reads and writes the storage; autograd does not see kernels
    if t.device.type != "cpu":
        t = t.cpu()
    d = dt.as_dtype(t.dtype)
    if d.name in ("bfloat16",):
        return t.view(torch.int16).numpy().view(d.np)
    if d.name.startswith("float8"):
        return t.view(torch.uint8).numpy().view(d.np)
    return t.numpy()


def _from_numpy(a: np.ndarray):
    """A torch CPU tensor sharing `a`'s memory, narrow floats included (viewed through ints)."""
    import torch

    d = dt.from_numpy(a.dtype)
    if d.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if d.name.startswith("float8"):
        return torch.from_numpy(a.view(np.uint8)).view(dt.torch_dtype(d))
    return torch.from_numpy(a)


def run_converted(artifact, params, written_ids, full: list, dyn: dict) -> None:
    """Run `artifact` on `full` (one value per parameter of `params`), converting each array to
    its array API; parameters whose id is in `written_ids` are copied back when converted."""
    api = artifact.array_api
    written = [id(p) in written_ids for p in params]
    if api == "numpy":
        full = subbyte.storage_args(params, full)  # packed sub-byte inputs unpacked
        conv, back = [], []
        for a, w in zip(full, written):
            if _is_torch(a):
                arr = _to_numpy(a)
                if a.device.type != "cpu" or not arr.flags.c_contiguous:
                    arr = np.ascontiguousarray(arr)
                    if w:
                        back.append((a, arr))
                conv.append(arr)
            elif isinstance(a, np.ndarray) and not a.flags.c_contiguous:
                arr = np.ascontiguousarray(a)
                if w:
                    back.append((a, arr))
                conv.append(arr)
            else:
                conv.append(a)
        artifact.run(conv, dyn)
        for orig, arr in back:
            if _is_torch(orig):  # _from_numpy views every narrow float (bf16, fp8) as torch's
                orig.copy_(_from_numpy(arr).to(orig.device))
            else:
                orig[...] = arr
        return
    # torch API (device targets): numpy arrays go to the device and come back

    conv, back = [], []
    for a, w in zip(full, written):
        if isinstance(a, np.ndarray):
            t = _from_numpy(np.ascontiguousarray(a)).to(artifact.device)
            if w:
                back.append((a, t))
            conv.append(t)
        elif _is_torch(a) and not a.is_contiguous():
            t = a.contiguous()
            if w:
                back.append((a, t))
            conv.append(t)
        else:
            conv.append(a)
    artifact.run(conv, dyn)
    for orig, t in back:
        if isinstance(orig, np.ndarray):
            orig[...] = _to_numpy(t)
        else:
            orig.copy_(t)
