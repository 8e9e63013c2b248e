"""The order of a TIR function's parameters (no `tvm` import): shared by the lowering, which
declares them, and the runners, which pass arguments."""

from __future__ import annotations


def call_order(func) -> list:
    """The user's signature (buffers and scalar Vars), then any buffer parameter not in it."""
    sig = list(func.attr("signature") or func.params)
    ids = {id(p) for p in sig}
    return sig + [p for p in func.params if id(p) not in ids]
