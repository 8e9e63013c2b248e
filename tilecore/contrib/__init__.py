"""Optional integrations built on tilecore's kernels; each module imports its third-party
dependency (torch, ...) lazily, so `import tilecore` never needs them."""
