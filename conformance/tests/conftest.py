import pytest
from broken_backends import Exp2OneUlpHigh, GemmDropsKTail

from tilecore import plugins


def _registered(obj):
    plugins.register(obj, obj.kind)
    try:
        yield obj.kind
    finally:
        plugins.unregister(obj.kind)


@pytest.fixture
def broken_exp2():
    """Target name of an interp whose exp2 is one ulp high."""
    yield from _registered(Exp2OneUlpHigh())


@pytest.fixture
def broken_gemm():
    """Target name of an interp whose gemm drops the K tail (K % 16)."""
    yield from _registered(GemmDropsKTail())
