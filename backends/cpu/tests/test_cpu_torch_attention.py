"""tilecore.contrib.attention on the `cpu` backend (numba): forward and backward kernels against
torch's scaled_dot_product_attention in float64 (one causal grouped-query case: each variant
costs a few seconds of numba compilation)."""

import pytest

torch = pytest.importorskip("torch")

from tilecore.contrib.attention import scaled_dot_product_attention as tile_sdpa  # noqa: E402


def test_gradients_on_cpu_match_torch():
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(1, 4, 40, 32, generator=gen).requires_grad_()
    k, v = (torch.randn(1, 2, 40, 32, generator=gen).requires_grad_() for _ in range(2))
    g = torch.randn(1, 4, 40, 32, generator=gen)
    o = tile_sdpa(q, k, v, is_causal=True, enable_gqa=True, target="cpu")
    got = (o, *torch.autograd.grad(o, (q, k, v), g))
    ref = [x.detach().double().requires_grad_() for x in (q, k, v)]
    o64 = torch.nn.functional.scaled_dot_product_attention(*ref, is_causal=True, enable_gqa=True)
    want = (o64, *torch.autograd.grad(o64, ref, g.double()))
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)
