"""CUDA spellings of scalar math (the `cexpr.py` math hooks): functions CUDA computes faster
than the C spelling does, within the tolerances inexact outputs are compared at.

A mixin of `CudaRenderer` (over the C-expression layer's math hooks).
"""

from __future__ import annotations

from tilecore.dtypes import DType

# NaN-propagating float32 min / max (the semantics' np.minimum / np.maximum; fminf / fmaxf drop
# NaN) through PTX `min.NaN` / `max.NaN` (sm_80+, every arch this backend targets): one
# FMNMX.NAN, as fminf's FMNMX; float64 has no .NaN form and keeps the C compare and select.
_MINMAX_F32 = ('float {fn}(float a, float b) {{ float r; asm("{op}.NaN.f32 %0, %1, %2;" '
               ': "=f"(r) : "f"(a), "f"(b)); return r; }}')


# fast_math spellings: name -> (helper, its definition after helper_prefix). PTX ex2.approx.ftz
# (about 2 ulp; subnormal results flush to zero, far below every inexact tolerance); exp(x) as
# ex2(x * log2 e), as CUDA's own __expf.
_FAST = {
    "exp2": ("tilecore_ex2", 'float tilecore_ex2(float x) { float r; asm("ex2.approx.ftz.f32 %0, %1;" '
                             ': "=f"(r) : "f"(x)); return r; }'),
    "exp": ("tilecore_exp_fast", "float tilecore_exp_fast(float x) { return __expf(x); }"),
}


class MathRenderMixin:
    """`math_call` / `minmax_helper` / `fast_divide` and integer min / max in CUDA."""

    def math_call(self, name: str, d: DType) -> str:
        """`rsqrtf` for float32 rsqrt (MUFU.RSQ, within 2 ulp; inexact outputs are compared at
        1e-4 relative or looser) instead of an IEEE division by an IEEE square root, whose
        slow-path subroutine calls gave RMSNorm a stack frame. Under `fast_math`, float32
        exp2 / exp as one MUFU.EX2 (`_FAST`) instead of exp2f's range check and two scaling
        multiplies around it (softmax and attention inner loops)."""
        if name == "rsqrt" and d.name == "float32":
            return "rsqrtf({})"
        if name in _FAST and d.name == "float32" and self.fast_math:
            fn, body = _FAST[name]
            if fn not in self.helpers:
                self.helpers[fn] = f"{self.helper_prefix()} {body}"
            return fn + "({})"
        return super().math_call(name, d)

    def minmax_helper(self, fn: str, name: str, d: DType) -> str:
        """float32 min / max as PTX's NaN-propagating `min.NaN` / `max.NaN`."""
        if d.name == "float32":
            return _MINMAX_F32.format(fn=fn, op=name)
        return super().minmax_helper(fn, name, d)

    def fast_divide(self, a: str, b: str) -> str:
        """`__fdividef`: MUFU.RCP and a multiply, 2 ulp for |b| in [2^-126, 2^126]."""
        return f"__fdividef({a}, {b})"

    def expr_BinOp(self, e) -> str:
        """As the base, but int min/max through CUDA's overloads, which evaluate each operand once."""
        t = e.a.dtype
        if e.op in ("min", "max") and t.is_int and t.bits >= 32:
            return f"{e.op}({self.expr(e.a)}, {self.expr(e.b)})"
        return super().expr_BinOp(e)
