"""tilecore's HIP backend (AMD GPUs): lowering facts and MFMA/WMMA tensorization
(`lowering`), the HIP dialect of the GPU renderer (`render`), the offline clang build
(`build`), and the ctypes path to the HIP runtime (`runtime`, `artifact`)."""
