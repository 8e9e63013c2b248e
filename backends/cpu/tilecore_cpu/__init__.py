"""tilecore's cpu backend (target `cpu`): tile IR lowered to Python that numba compiles."""
