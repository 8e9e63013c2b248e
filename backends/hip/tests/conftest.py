import os
import sys

# Verify the IR after every pass in every test run (tilecore.passes.pipeline).
os.environ.setdefault("TILECORE_VERIFY", "1")
os.environ.setdefault("TILECORE_CHECK_UNINIT", "1")  # uninitialized reads are reported

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
EXAMPLES = os.path.join(ROOT, "examples")
if EXAMPLES not in sys.path:
    sys.path.insert(0, EXAMPLES)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
# Code objects are cached inside the clone (build/ is git-ignored), never in the home directory.
os.environ.setdefault("TILECORE_CACHE_DIR", os.path.join(ROOT, "build", "tilecore-cache"))

import tilecore_hip.lowering  # noqa: E402
import tilecore_hip.plugin  # noqa: E402

from tilecore import plugins  # noqa: E402

# Installed (pip install -e backends/hip) the entry points register these; from a source tree
# without the distribution's metadata they are registered here.
for _name, _mod in (("hip-lowering", tilecore_hip.lowering), ("hip", tilecore_hip.plugin)):
    if plugins.manager().get_plugin(_name) is None and not plugins.manager().is_registered(_mod):
        plugins.register(_mod, name=_name)
