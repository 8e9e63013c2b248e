"""FlashAttention as a `torch.autograd.Function`: a drop-in for
`torch.nn.functional.scaled_dot_product_attention` whose forward and backward are tilecore
kernels (examples/flash_attention.py and examples/flash_attention_bwd.py).

    from tilecore.contrib.attention import scaled_dot_product_attention
    out = scaled_dot_product_attention(q, k, v, is_causal=True)          # q: [batch, heads, seq, dim]

Supported: float16 / bfloat16 / float32 tensors in torch's [batch, heads, seq, dim] layout,
`is_causal`, `scale`, grouped-query attention (`enable_gqa=True` with heads a multiple of the
KV heads), any sequence length (query and key lengths equal). `attn_mask` and `dropout_p` are
refused with a TileError (never silently ignored). The target is `cuda` for CUDA tensors and
`interp` otherwise unless `target=` names one (e.g. "cpu"); `config` passes tile parameters
(block_M, block_N, num_stages, threads) to the forward kernel and `bwd_config` to the backward.
Left out, they are `attention_configs.tuned_config`'s: the measured-best tiles on Hopper (cuda
sm_90 / sm_90a), the programs' defaults on every other target. torch is imported on first use.
"""

from __future__ import annotations

import functools
import importlib

from ..errors import TileCallError, TileError, TileTypeError, caller_loc
from ..example_protocol import examples_dir

_DTYPES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32"}


def _example(name: str):
    """The example module `name` (the kernels live in examples/, the one place they are written)."""
    d = examples_dir()
    if d is None or not (d / f"{name}.py").is_file():
        raise TileError(f"tilecore.contrib.attention needs examples/{name}.py, which is not installed",
                        caller_loc(), hint="run from a source checkout or set $TILECORE_EXAMPLES")
    import sys

    if str(d) not in sys.path:
        sys.path.insert(0, str(d))
    return importlib.import_module(name)


@functools.lru_cache(maxsize=64)
def _kernels(batch, heads, kv_heads, seq, dim, dtype, causal, scale, target, config, bwd_config):
    """(forward, preprocess, backward) compiled kernels for one problem shape and target."""
    import tilecore

    fa, bwd = _example("flash_attention"), _example("flash_attention_bwd")
    common = dict(batch=batch, heads=heads, seq_len=seq, dim=dim, dtype=dtype, kv_heads=kv_heads,
                  sm_scale=scale)
    fwd = tilecore.compile(fa.program(is_causal=causal, return_lse=True, **common, **dict(config)),
                           out_idx=[-2, -1], target=target)
    pre = tilecore.compile(bwd.preprocess_program(batch, heads, seq, dim, dtype), out_idx=[-1], target=target)
    main = tilecore.compile(bwd.program(is_causal=causal, **common, **dict(bwd_config)),
                            out_idx=bwd.OUT_IDX, target=target)
    return fwd, pre, main


def _check(query, key, value, attn_mask, dropout_p, enable_gqa):
    """Refuse what the kernels do not implement, naming the caller's line."""
    loc = caller_loc()
    if attn_mask is not None:
        raise TileCallError("attn_mask is not supported by tilecore's attention", loc,
                            hint="use is_causal=True for a causal mask, or torch's SDPA for other masks")
    if dropout_p:
        raise TileCallError(f"dropout_p={dropout_p} is not supported by tilecore's attention", loc,
                            hint="pass dropout_p=0.0 (apply dropout outside attention)")
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4 or key.shape != value.shape:
        shapes = ", ".join(str(tuple(t.shape)) for t in (query, key, value))
        raise TileCallError("query, key and value must be [batch, heads, seq, dim], key and value of "
                            f"one shape; got {shapes}", loc,
                            hint="reshape the inputs to 4-d [batch, heads, seq, dim] tensors")
    (b, h, s, d), (bk, hk, sk, dk) = query.shape, key.shape
    if (bk, sk, dk) != (b, s, d):
        raise TileCallError(f"key {tuple(key.shape)} must match query {tuple(query.shape)} in batch, "
                            "sequence length and head dim", loc,
                            hint="tilecore's attention needs equal query and key lengths")
    if hk != h and not (enable_gqa and h % hk == 0):
        raise TileCallError(f"query has {h} heads and key {hk}", loc,
                            hint="pass enable_gqa=True with query heads a multiple of key heads")
    if str(query.dtype) not in _DTYPES or key.dtype != query.dtype or value.dtype != query.dtype:
        raise TileTypeError(f"dtypes {query.dtype}, {key.dtype}, {value.dtype}: tilecore's attention "
                            "takes one of float16, bfloat16, float32 for all three", loc,
                            hint="cast query, key and value to one of those dtypes")


def _function():
    """The autograd Function class (built on first use: torch is optional for tilecore)."""
    import torch

    class FlashAttention(torch.autograd.Function):
        """Forward saves (Q, K, V, O, LSE) in the kernels' [batch, seq, heads, dim] layout;
        backward runs the delta preprocess and the dQ/dK/dV kernel."""

        @staticmethod
        def forward(ctx, query, key, value, is_causal, scale, target, config, bwd_config):
            b, h, s, d = query.shape
            kernels = _kernels(b, h, key.shape[1], s, d, _DTYPES[str(query.dtype)], bool(is_causal),
                               scale, target, config, bwd_config)
            q, k, v = (t.detach().transpose(1, 2).contiguous() for t in (query, key, value))
            o, lse = kernels[0](q, k, v)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.kernels = kernels
            return o.transpose(1, 2)

        @staticmethod
        def backward(ctx, grad_out):
            q, k, v, o, lse = ctx.saved_tensors
            _, pre, main = ctx.kernels
            do = grad_out.transpose(1, 2).contiguous().to(q.dtype)
            dq, dk, dv = main(q, k, v, do, lse, pre(o, do))
            grads = (dq.to(q.dtype), dk, dv)
            return (*(g.transpose(1, 2) for g in grads), None, None, None, None, None)

    return FlashAttention


_FN: list = []


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False, *, target=None, config=None, bwd_config=None):
    """softmax(Q K^T * scale [+ causal mask]) V with tilecore kernels, differentiable through
    torch.autograd; arguments as torch's `scaled_dot_product_attention` (see the module doc)."""
    _check(query, key, value, attn_mask, dropout_p, enable_gqa)
    if not _FN:
        _FN.append(_function())
    if target is None:
        target = "cuda" if query.is_cuda else "interp"
    if config is None or bwd_config is None:
        from .attention_configs import tuned_config

        tuned = dict(dim=query.shape[-1], is_causal=bool(is_causal), dtype=_DTYPES[str(query.dtype)],
                     seq_len=query.shape[-2])
        config = tuned_config("fwd", target, **tuned) if config is None else config
        bwd_config = tuned_config("bwd", target, **tuned) if bwd_config is None else bwd_config
    freeze = lambda c: tuple(sorted(c.items()))  # noqa: E731 - hashable cache key
    return _FN[0].apply(query, key, value, is_causal, None if scale is None else float(scale), target,
                        freeze(config), freeze(bwd_config))
