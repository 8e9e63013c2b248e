"""tilecore.contrib.attention (the autograd Function over the FlashAttention kernels) on interp
against torch's own scaled_dot_product_attention: outputs, gradients, a few training steps of
a tiny model, and the refusals of what the kernels do not implement."""

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from tilecore.contrib.attention import scaled_dot_product_attention as tile_sdpa  # noqa: E402
from tilecore.errors import TileCallError  # noqa: E402


def _grads(fn, q, k, v, g, **kw):
    o = fn(q, k, v, **kw)
    return (o, *torch.autograd.grad(o, (q, k, v), g))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("causal", [False, True])
def test_output_and_gradients_match_torch(dtype, tol, causal):
    """Grouped heads (4 query heads on 2 KV heads), a length that is not a tile multiple, a
    non-default scale; torch's reference runs in float64."""
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 4, 40, 32, generator=gen).to(dtype).requires_grad_()
    k, v = (torch.randn(2, 2, 40, 32, generator=gen).to(dtype).requires_grad_() for _ in range(2))
    g = torch.randn(2, 4, 40, 32, generator=gen).to(dtype)
    got = _grads(tile_sdpa, q, k, v, g, is_causal=causal, scale=0.2, enable_gqa=True)
    ref64 = [x.detach().double().requires_grad_() for x in (q, k, v)]
    want = _grads(F.scaled_dot_product_attention, *ref64, g.double(), is_causal=causal, scale=0.2,
                  enable_gqa=True)
    for a, b in zip(got, want):
        assert a.dtype == dtype
        torch.testing.assert_close(a.double(), b, rtol=tol, atol=tol)


class TinyAttention(torch.nn.Module):
    """One causal self-attention layer and a linear head: enough to train for a few steps."""

    def __init__(self, sdpa, dim=32, heads=2):
        super().__init__()
        self.sdpa, self.heads = sdpa, heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = self.sdpa(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        return self.out(y)


def test_training_steps_follow_torch():
    """The same model trained with tilecore's attention and with torch's: identical losses and
    parameters after a few SGD steps (float32, so only rounding differs)."""
    torch.manual_seed(0)
    ours = TinyAttention(tile_sdpa)
    theirs = TinyAttention(F.scaled_dot_product_attention)
    theirs.load_state_dict(ours.state_dict())
    x, y = torch.randn(2, 24, 32), torch.randn(2, 24, 32)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (ours, theirs)]
    losses = []
    for _ in range(3):
        step = []
        for m, opt in zip((ours, theirs), opts):
            opt.zero_grad()
            loss = F.mse_loss(m(x), y)
            loss.backward()
            opt.step()
            step.append(loss.item())
        losses.append(step)
    assert losses[-1][0] < losses[0][0]  # it trains
    for a, b in losses:
        assert abs(a - b) < 1e-5
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5, msg=name)


def test_unsupported_arguments_are_refused():
    q = torch.randn(1, 2, 8, 16)
    with pytest.raises(TileCallError, match="attn_mask"):
        tile_sdpa(q, q, q, attn_mask=torch.ones(8, 8, dtype=torch.bool))
    with pytest.raises(TileCallError, match="dropout"):
        tile_sdpa(q, q, q, dropout_p=0.1)
    with pytest.raises(TileCallError, match="enable_gqa"):
        tile_sdpa(q, q[:, :1], q[:, :1])
    with pytest.raises(TileCallError, match="sequence length"):
        tile_sdpa(q, q[:, :, :4], q[:, :, :4])
