import os
import sys

# Verify the IR after every pass in every test run (tilecore.passes.pipeline).
os.environ.setdefault("TILECORE_VERIFY", "1")
os.environ.setdefault("TILECORE_CHECK_UNINIT", "1")  # uninitialized reads are reported

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)

import toy_backend  # noqa: E402
from hypothesis import settings  # noqa: E402

from tilecore import plugins  # noqa: E402

# The toy backend (tests/toy_backend.py) is registered for the whole session: it is how the
# core's tests run the thread lowering with no backend distribution installed.
if plugins.manager().get_plugin("toy") is None:
    plugins.register(toy_backend.TOY, name="toy")

# CI is deterministic: derandomized examples (HYPOTHESIS_PROFILE=explore for random runs).
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
