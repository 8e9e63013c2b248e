import os

# Verify the IR after every pass in every test run (tilecore.passes.pipeline).
os.environ.setdefault("TILECORE_VERIFY", "1")
