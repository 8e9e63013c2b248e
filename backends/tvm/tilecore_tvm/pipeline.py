"""The TIR pass pipeline for the GPU-mapped `tvm:*` targets: TVM 0.27's own `s_tir` pipeline
(`tvm/s_tir/pipeline.py`, the default for every GPU target) without its `ThreadSync` passes.

Why: the lowering places the block barriers itself (one before and after every statement split
over threads, see `lower.py`), which is exactly what the tile program's statement order needs.
TVM's planner cannot prove that elements dealt to threads by a flat index never meet, so it
wants barriers inside the per-thread guard and then stops with "Cannot insert syncs inside
condition". (TVM's other registered pipeline, "default", is broken in 0.27: it calls a
removed `LowerInitBlock` pass.) `tvm:llvm` keeps TVM's default pipeline.
"""

from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.tirx import compilation_pipeline as cp

NAME = "tilecore-gpu"


def _factory():
    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod: tvm.ir.IRModule, _ctx) -> tvm.ir.IRModule:
        config = tvm.transform.PassContext.current().config
        passes = [
            s_tir.transform.CanonicalizeLoop(),
            s_tir.transform.LowerCrossThreadReduction(),
            s_tir.transform.LowerInitBlock(),
            s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
            s_tir.transform.ConvertBlocksToOpaque(),
            s_tir.transform.LiftThreadBinding(),
            s_tir.transform.CompactBufferAllocation(),
            s_tir.transform.UnifyThreadBinding(),
            s_tir.transform.LowerMatchBuffer(),
            s_tir.transform.StmtSimplify(),
            s_tir.transform.LowerOpaqueBlock(),
            tirx.transform.FlattenBuffer(),
            tirx.transform.BF16ComputeLegalize(),
            tirx.transform.NarrowDataType(32),
            s_tir.transform.LoopPartition(),
            tirx.transform.VectorizeLoop(not bool(config.get("tirx.disable_vectorize", False))),
            tirx.transform.StorageRewrite(),
            tirx.transform.UnrollLoop(),
            tirx.transform.StmtSimplify(),
            tirx.transform.RemoveNoOp(),
            s_tir.transform.RewriteUnsafeSelect(),
            # no CommonSubexprElim: before SplitHostDevice it hoists host expressions of the
            # sizes (a `T.ceildiv(m, 4)` grid) into new variables the kernel then takes as
            # parameters nobody passes (`cse_v3`, found by conformance)
            tirx.transform.FP8ComputeLegalize(),
            tirx.transform.VerifyMemory(),
            tirx.transform.AnnotateEntryFunc(),
            s_tir.transform.MergeSharedMemoryAllocations(),
            tirx.transform.SplitHostDevice(),
            tirx.transform.MakePackedAPI(),
            tirx.transform.FP8StorageLegalize(),
            tirx.transform.BF16StorageLegalize(),
        ]
        return tvm.ir.transform.Sequential(passes)(mod)

    return _pipeline, cp.finalize_host_passes, cp.finalize_device_passes


def gpu_pipeline() -> str:
    """The registered name of the pipeline (registered on first use)."""
    if NAME not in cp.PIPELINE_MAP:
        cp.register_tir_pipeline(NAME, _factory)
    return NAME
