"""tilecore's NumPy interpreter backend (target `interp`): the exact oracle."""
