"""`tilecore.carver`: the parts of TileLang's `tilelang.carver` that mean something without its
roller (TileLang's search over tile shapes, which tilecore does not have).

- `tilecore.carver.arch`: the device a program runs on (`driver.get_num_sms()`, `CUDA(...)`,
  `CDNA(...)` descriptions read from the visible device and the target's facts);
- `tilecore.carver.template.MatmulTemplate` and `tilecore.carver.roller.rasterization` exist so
  a program importing them loads; asking the template for hints raises a TileError naming
  tilecore's replacement (`tilecore.autotune` over a list of configs).
"""

from . import arch

__all__ = ["arch"]
