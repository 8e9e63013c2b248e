"""tilecore-emu: executes lowered thread programs lane by lane with NumPy."""
