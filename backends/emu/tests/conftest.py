import os
import sys

# Verify the IR after every pass in every test run (tilecore.passes.pipeline).
os.environ.setdefault("TILECORE_VERIFY", "1")
os.environ.setdefault("TILECORE_CHECK_UNINIT", "1")  # uninitialized reads are reported

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, os.path.abspath(EXAMPLES))
