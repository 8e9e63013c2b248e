import os
import sys

# Verify the IR after every pass in every test run (tilecore.passes.pipeline).
os.environ.setdefault("TILECORE_VERIFY", "1")

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)

from hypothesis import settings  # noqa: E402

# CI is deterministic: derandomized examples (HYPOTHESIS_PROFILE=explore for random runs).
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
