import os

# Verify the IR after every pass in every test run (tilecore.passes.pipeline).
os.environ.setdefault("TILECORE_VERIFY", "1")
os.environ.setdefault("TILECORE_CHECK_UNINIT", "1")  # uninitialized reads are reported
