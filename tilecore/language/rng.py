"""`T.rng_init(seed, seq=None, off=0)` and `T.rng_rand()`: TileLang's per-thread random numbers
(cuRAND's `curandStatePhilox4_32_10_t`: `curand_init(seed, seq, off, &s)`, then `curand(&s)`),
written with tilecore's existing integer operations so every target that runs thread-level
kernels computes the same bits (the oracle included), and the numbers are cuRAND's.

The state is a hidden per-thread `uint32[7]`: the Philox counter (4 words), the key (the seed's
two words) and the position (0..3) in the current block of four outputs. `curand_init` puts the
sequence number in the counter's high 64 bits and `off // 4` in its low 64 bits, the position at
`off % 4`. Each `rng_rand()` computes Philox4x32-10 of the counter (10 rounds of two 32x32->64
multiplies, each as two 32x16-bit products in int64 that cannot overflow, xors with the key and
the key's Weyl bump), takes the output at the position and advances it, incrementing the
128-bit counter after the fourth output. Thread-level kernels only: the state belongs to a
thread (seq defaults to `tx + bx * threads`, TileLang's default).
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import TileSyntaxError, TileTypeError
from ..ir.buffer import Buffer
from ..ir.expr import Expr, Load, Var, as_expr, binop, bitwise, cast, const, select
from ..ir.stmt import LetStmt, Store
from .builder import builtin
from .thread_level import _frame, get_block_binding, get_thread_binding

_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # Philox4x32 multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # the key's Weyl bump
U32, I64 = dt.uint32, dt.int64  # 64-bit words as int64: uint64 is a build-time type in tilecore
GENERATOR = "curandStatePhilox4_32_10_t"



def _let(b, name: str, value: Expr) -> Var:
    """Bind `value` to a fresh variable (keeps the rounds' expressions linear in size)."""
    v = Var(b.unique_name(name), value.dtype)
    b.emit(LetStmt(v, value, b.loc))
    return v


def _mulhilo(b, m: int, x: Expr) -> tuple[Expr, Expr]:
    """The high and low words of the 64-bit product m * x of two uint32 values, from two
    products of m with x's 16-bit halves (each < 2**48): no signed 64-bit product overflows
    (undefined in C), and the low word is computed in wrapping uint32 arithmetic."""
    x0 = _let(b, "rng_x", bitwise("bitand", x, const(0xFFFF, U32)))
    x1 = _let(b, "rng_x", bitwise("shr", x, const(16, U32)))
    p0 = _let(b, "rng_p", binop("mul", const(m, I64), cast(x0, I64)))
    p1 = _let(b, "rng_p", binop("mul", const(m, I64), cast(x1, I64)))
    hi = cast(bitwise("shr", binop("add", p1, bitwise("shr", p0, const(16, I64))), const(16, I64)), U32)
    lo = binop("add", cast(p0, U32), binop("mul", cast(p1, U32), const(1 << 16, U32)))
    return hi, lo


def philox(b, ctr: list, key: list) -> list:
    """Philox4x32-10 of counter `ctr` (4 uint32 expressions) under `key` (2): 4 Vars."""
    c, k0, k1 = list(ctr), key[0], key[1]
    for r in range(10):
        if r:
            k0 = _let(b, "rng_k", binop("add", k0, const(_W0, U32)))
            k1 = _let(b, "rng_k", binop("add", k1, const(_W1, U32)))
        hi0, lo0 = _mulhilo(b, _M0, c[0])
        hi1, lo1 = _mulhilo(b, _M1, c[2])
        c = [_let(b, "rng_c", bitwise("bitxor", bitwise("bitxor", hi1, c[1]), k0)),
             _let(b, "rng_c", lo1),
             _let(b, "rng_c", bitwise("bitxor", bitwise("bitxor", hi0, c[3]), k1)),
             _let(b, "rng_c", lo0)]
    return c


def _state(b, what: str) -> Buffer:
    st = getattr(b.kernel, "rng_state", None)
    if st is None:
        raise TileSyntaxError(f"{what} before T.rng_init", b.loc,
                              hint="call T.rng_init(seed) first in the kernel body")
    return st


@builtin
def rng_init(seed, seq=None, off=0, generator=GENERATOR) -> None:
    """Start this thread's random stream: cuRAND's `curand_init(seed, seq, off)` for Philox;
    `seq` defaults to the thread's global index `tx + bx * threads`."""
    b = _frame("T.rng_init")
    if generator != GENERATOR:
        raise TileTypeError(f"T.rng_init(generator={generator!r}) is not provided", b.loc,
                            hint=f"use the default {GENERATOR!r} (cuRAND's Philox4x32-10)")
    if seq is None:
        seq = binop("add", get_thread_binding(), binop("mul", get_block_binding(), b.kernel.threads[0]))
    seed64, seq64, off64 = (cast(as_expr(x), I64) for x in (seed, seq, off))
    st = getattr(b.kernel, "rng_state", None)
    if st is None:
        st = b.allocate(Buffer(b.unique_name("rng_state"), (7,), U32, "local"))
        b.kernel.rng_state = st
    n = bitwise("shr", off64, const(2, I64))  # (a negative offset is the caller's bug, as in cuRAND)
    words = [n, bitwise("shr", n, const(32, I64)), seq64, bitwise("shr", seq64, const(32, I64)),
             seed64, bitwise("shr", seed64, const(32, I64)), bitwise("bitand", off64, const(3, I64))]
    for i, w in enumerate(words):
        b.emit(Store(st, (const(i),), cast(w, U32), b.loc))


@builtin
def rng_rand() -> Expr:
    """The next 32-bit unsigned number of this thread's stream (cuRAND's `curand(&state)`)."""
    b = _frame("T.rng_rand")
    st = _state(b, "T.rng_rand()")
    w = [_let(b, "rng_s", Load(st, (const(i),))) for i in range(7)]
    out = philox(b, w[:4], w[4:6])
    pos = w[6]
    value = select(binop("eq", pos, const(0, U32)), out[0],
                   select(binop("eq", pos, const(1, U32)), out[1],
                          select(binop("eq", pos, const(2, U32)), out[2], out[3])))
    ret = _let(b, "rng_value", value)
    wrap = _let(b, "rng_wrap", binop("eq", pos, const(3, U32)))
    b.emit(Store(st, (const(6),), select(wrap, const(0, U32), binop("add", pos, const(1, U32))), b.loc))
    carry: Expr = wrap  # the 128-bit counter's increment after the fourth output
    for i in range(4):
        nxt = _let(b, "rng_n", select(carry, binop("add", w[i], const(1, U32)), w[i]))
        b.emit(Store(st, (const(i),), nxt, b.loc))
        carry = _let(b, "rng_carry", binop("and", carry, binop("eq", nxt, const(0, U32))))
    return ret


__all__ = ["rng_init", "rng_rand", "philox"]
