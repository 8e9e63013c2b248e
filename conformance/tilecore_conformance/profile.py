"""How many generated programs a pytest run checks per target, and how they are split into shards.

Each shard is its own test item (`test_generated_programs[cpu-s3]`) running its share of the
programs from its own Hypothesis seed, so pytest-xdist spreads one target's programs over every
core and a long target does not leave one worker running alone at the end of CI.

- CI (no option): `CI_EXAMPLES` programs per target in `CI_SHARDS` shards; shard i draws from the
  fixed seed i, so every run checks the same programs.
- `--tile-long`: `LONG_EXAMPLES` programs per target in `LONG_SHARDS` shards, from a random base
  seed printed in the summary (`--tile-seed` repeats a run).
- `--tile-examples N` (`--tile-shards K`): N programs in K shards; up to `CI_EXAMPLES` from the
  fixed seeds, more from a random base seed, so a large N draws new programs on every run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

CI_EXAMPLES = 300
CI_SHARDS = 6
LONG_EXAMPLES = 10_000
LONG_SHARDS = 100


@dataclass(frozen=True)
class Profile:
    """Programs per target, shards, and the seed of shard 0 (shard i uses `seed + i`)."""

    programs: int
    shards: int
    seed: int
    fixed: bool  # True: the CI profile's fixed seeds (a per-target ci_programs may apply)

    def share(self, shard: int, programs: int | None = None) -> int:
        """Programs of `shard` when the target runs `programs` (default: the profile's)."""
        base, extra = divmod(self.programs if programs is None else programs, self.shards)
        return base + (shard < extra)

    def shard_seed(self, shard: int) -> int:
        """The Hypothesis seed of `shard`."""
        return self.seed + shard


def from_options(examples: int | None, long: bool, shards: int | None, seed: int | None) -> Profile:
    """The profile the command-line options ask for (see the module docstring)."""
    if examples is not None and examples < 1:
        raise ValueError(f"--tile-examples must be at least 1 (got {examples})")
    if shards is not None and shards < 1:
        raise ValueError(f"--tile-shards must be at least 1 (got {shards})")
    if long:
        n = LONG_EXAMPLES if examples is None else examples
        k = LONG_SHARDS if shards is None else shards
    elif examples is None:
        n, k = CI_EXAMPLES, CI_SHARDS if shards is None else shards
    else:
        n, k = examples, 1 if shards is None else shards
    k = min(k, n)
    fixed = not long and n <= CI_EXAMPLES and seed is None
    if seed is None:
        seed = 0 if fixed else int.from_bytes(os.urandom(4), "little")
    return Profile(n, k, seed, fixed and examples is None)
