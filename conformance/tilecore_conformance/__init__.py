"""tilecore-conformance: Hypothesis-generated tile programs checked on every target against interp.

Public entry points: :func:`~.generate.cases` (the program strategy), :func:`~.runner.check_case`
(run one case on one target), :func:`~.suite.check_target` (the whole generated suite for one
target, outside pytest) and the pytest plugin (``--tile-target``, ``--tile-examples``).
"""

from .case import Case, Param
from .generate import cases

__all__ = ["Case", "Param", "cases"]
