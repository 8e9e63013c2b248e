"""The lane-level emulator of the thread IR: runs a lowered module one block at a time, every
thread a NumPy lane, with NaN-poisoned shared memory, race detection and intrinsics executed from
their declared lane maps. It lives in the core because it knows no vendor: any backend whose
lowering produces thread IR is executable here (the `emu` backend exposes it as `emu:<target>`,
and the core's own tests run the lowering on it through a toy backend)."""
