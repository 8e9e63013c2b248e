"""GPU check of `tilecore.contrib.attention` at its default (tuned) tiles: forward and backward
of a causal and a non-causal bf16 problem against torch's SDPA in float32, relative errors.

    python benchmarks/attention_contrib_check.py [batch heads seq dim]
"""

from __future__ import annotations

import sys


def main(argv=None) -> int:
    """Print forward / gradient relative errors; exit 1 when one is over bf16 tolerance."""
    import torch

    from tilecore.contrib.attention import scaled_dot_product_attention as tile_sdpa
    from tilecore.contrib.attention_configs import tuned_config

    b, h, s, d = (int(x) for x in (argv or sys.argv[1:]) or (2, 8, 1000, 128))
    bad = 0
    for causal in (False, True):
        print(f"causal={causal} tiles fwd {tuned_config('fwd', 'cuda', d, causal, 'bfloat16', seq_len=s)} "
              f"bwd {tuned_config('bwd', 'cuda', d, causal, 'bfloat16')}", flush=True)
        torch.manual_seed(1)
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        do = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        out = tile_sdpa(q, k, v, is_causal=causal)
        grads = torch.autograd.grad(out, (q, k, v), do)
        q32, k32, v32 = (x.detach().float().requires_grad_() for x in (q, k, v))
        ref = torch.nn.functional.scaled_dot_product_attention(q32, k32, v32, is_causal=causal)
        ref_grads = torch.autograd.grad(ref, (q32, k32, v32), do.float())
        for name, got, want in zip(("out", "dq", "dk", "dv"), (out, *grads), (ref, *ref_grads)):
            err = ((got.float() - want).norm() / want.norm()).item()
            bad += not err < 2e-2
            print(f"  {name}: rel err {err:.2e}", flush=True)
    print("contrib attention: " + ("OK" if not bad else f"{bad} over tolerance"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
