"""tilecore's CUDA backend: CUDA C++ rendering, NVRTC/nvcc build, driver-API launch on torch tensors.

The core never imports this package; it is found through the ``tilecore.backends`` entry points
(``cuda`` -> :mod:`tilecore_cuda.plugin`, ``cuda-lowering`` -> :mod:`tilecore_cuda.lowering`).
"""
