"""Metal tests: register the backend at run time when it is not installed (a worktree), verify
the IR after every pass and put the examples on sys.path. Builds go to metal-cpu's default
cache (in the temp dir) unless TILECORE_CACHE_DIR says otherwise."""

import os
import sys

os.environ.setdefault("TILECORE_VERIFY", "1")
os.environ.setdefault("TILECORE_CHECK_UNINIT", "1")  # uninitialized reads are reported

EXAMPLES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
HERE = os.path.dirname(__file__)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from metal_test_util import ensure_registered  # noqa: E402

ensure_registered()
