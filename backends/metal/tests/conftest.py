"""Metal tests: register the backend at run time when it is not installed (a worktree), verify
the IR after every pass, put the examples on sys.path, and cache builds in a per-session dir."""

import os
import sys
import tempfile

os.environ.setdefault("TILECORE_VERIFY", "1")
os.environ.setdefault("TILECORE_CACHE_DIR", os.path.join(tempfile.gettempdir(), "tilecore-test-cache"))

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from metal_test_util import ensure_registered  # noqa: E402

ensure_registered()
