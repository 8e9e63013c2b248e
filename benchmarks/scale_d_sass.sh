#!/bin/bash
# SASS counts (tools/sass_counts.py, nvcc 13.0, sm_90a) of the Hopper kernels the wgmma
# scale-d change touches (tilecore/lower/accum_zero.py), for the tree on PYTHONPATH:
#   PYTHONPATH=<this tree's paths> bash benchmarks/scale_d_sass.sh   # after
#   PYTHONPATH= bash benchmarks/scale_d_sass.sh                      # the installed tree (before)
set -u
export PATH=/usr/local/cuda-13.0/bin:$PATH
T=tools/sass_counts.py
G="block_M=128 block_N=256 block_K=64 num_stages=3 threads=256 panel=16"
run() { python "$T" "$@" --arch sm_90a 2>&1 | grep '^SASS' | sed -e 's/ LDG.E.128=.*STS=/ STS=/' ; }
run gemm M=4096 N=4096 K=4096 $G dtype=bfloat16
run gemm M=8192 N=8192 K=8192 $G dtype=float16
run gemm_fp8 M=8192 N=8192 K=8192 block_M=128 block_N=256 block_K=128 num_stages=3 threads=256 panel=8
run gemm M=64 N=4096 K=4096 block_M=64 block_N=32 block_K=256 num_stages=4 threads=128 b_eviction=evict_first
run flash_attention batch=8 heads=16 seq_len=4096 dim=128 block_M=128 block_N=128 num_stages=2 threads=256 overlap=True
run flash_attention batch=8 heads=16 seq_len=4096 dim=128 is_causal=True block_M=128 block_N=128 num_stages=2 threads=256 overlap=True diag_first=True
run flash_attention batch=8 heads=16 seq_len=4096 dim=64 block_M=192 block_N=128 num_stages=4 threads=384
run flash_attention_bwd batch=8 heads=16 seq_len=4096 dim=128 block_M=64 block_N=128 num_stages=2 threads=256 stagger=True dq_tma=True dq_early=True
run flash_attention_bwd batch=8 heads=16 seq_len=4096 dim=128 is_causal=True block_M=64 block_N=128 num_stages=2 threads=256 dq_tma=True
