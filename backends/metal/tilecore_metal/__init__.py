"""tilecore's Metal backend: targets `metal` (Apple GPUs through PyObjC) and `metal-cpu` (the same
MSL compiled as C++20 by clang against our `metal_stdlib` shim and run with one std::thread per
Metal thread). See backends/metal/README.md."""
