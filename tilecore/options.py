"""Compile options: TileLang's `pass_configs` as one frozen dataclass.

`tilecore.compile(..., pass_configs={...})` and `@tilecore.jit(pass_configs=...)` accept
TileLang's keys (strings such as ``"tl.disable_tma_lower"``, or members of a str enum like
TileLang's ``PassConfigKey``). Each key is one of three kinds:

- **honoured**: it maps to a field of `Options`, which reaches every pass through the target
  description (`TargetDesc.options`) and the backends through `module.attrs.options`;
- **known, not applied**: a TileLang key that means nothing for tilecore's pipeline (debug
  printing, TVM simplifier knobs, nvcc flags); accepted with a one-time `TileConfigWarning`;
- **unknown**: a TileError naming the key (a typo must not be silently dropped).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from .errors import TileConfigWarning, TileError, caller_loc


@dataclass(frozen=True)
class Options:
    """The options every pass and backend may read (all default to TileLang's defaults).

    - ``disable_tma_lower``, ``disable_warp_specialized``, ``disable_wgmma``,
      ``disable_vectorize_256``: forbid those code shapes; `async-pipeline` checks the first two
      (TMA stages and the producer warpgroup, tilecore.lower.tma_pipeline / warp_specialize),
      the passes that will produce the others must check theirs;
    - ``fast_math``: float32 division by a non-constant may be approximate (CUDA `__fdividef`,
      2 ulp; inside every inexact tolerance, and conformance compares exactly only divisions by
      powers of two), and so may float32 exp2 / exp (CUDA: one MUFU.EX2, subnormal results
      flushed to zero); off by default, as in TileLang;
    - ``enable_async_copy``: global-to-shared copies may become asynchronous copies (cp.async);
    - ``disable_vectorize``: no vector memory accesses (every access one element): T.Parallel
      runs and T.copy move scalars, so no 16-byte copy is left for `async-pipeline` to make
      asynchronous and no epilogue is staged for wider stores; `ldmatrix` and the fragment
      layouts are unchanged (read in `tilecore/lower/vectorize.py` and `parallel.py`);
    - ``disable_thread_storage_sync``: no automatic barriers (`insert-barriers` is skipped; the
      kernel author synchronizes, and `emu` reports the races of a kernel that does not);
    - ``disable_fragment_pipeline`` (tilecore's own key ``tilecore.disable_fragment_pipeline``):
      mma.sync gemms in asynchronous-copy pipelines keep the as-written order of operand loads
      and mmas (`fragment-pipeline` is skipped; for A/B comparisons in benchmarks);
    - ``disable_tma_store`` (tilecore's own key ``tilecore.disable_tma_store``): accumulator
      epilogues keep the per-thread staged copy instead of TMA stores (tilecore.lower.tma_store;
      for A/B comparisons in benchmarks);
    - ``disable_wgmma_scale_d`` (tilecore's own key ``tilecore.disable_wgmma_scale_d``): wgmma
      accumulators keep their zeroing stores instead of starting with scale-d 0 on the first
      k step (tilecore.lower.accum_zero; for A/B comparisons in benchmarks);
    - ``disable_staged_swizzle`` (tilecore's own key ``tilecore.disable_staged_swizzle``): a
      shared tile the program writes from a fragment itself (`T.copy(frag, shared)`, e.g.
      FlashAttention's O_shared) is placed as if only copied (row-major) instead of by the
      column write pattern of an epilogue staging tile (tilecore.lower.smem), and a TMA
      reduce-add's accumulator stores keep fragment order instead of exchanging register runs
      between lanes to avoid bank conflicts (tilecore.lower.tma_reduce.store_swap); for A/B runs;
    - ``ws_pingpong`` (tilecore's own key ``tilecore.ws_pingpong``, off by default: 3-5% slower
      than the same tile without it on the H200, BENCHMARKS.md): persistent warp-specialized
      GEMMs of one consumer warpgroup get a second one on alternate tiles
      (tilecore.lower.pingpong).
    - ``warpgroup_turns`` (``tilecore.warpgroup_turns``, off): the consumer warpgroups of a
      warp-specialized kernel take turns issuing each loop iteration's gemms, FlashAttention-3's
      scheduler barrier (tilecore.lower.wg_turns); for FlashAttention's forward.
    - ``ws_persistent_any`` (``tilecore.ws_persistent_any``, off): persistent tile scheduling
      (warp_specialize._persistent) also for warp-specialized kernels whose one staged loop is
      not a bare GEMM main loop, given a trip count every tile shares (FlashAttention's
      non-causal forward: the producer loads the next tile's K/V during the epilogue).
    - ``mbarrier_suspend_hint`` (``tilecore.mbarrier_suspend_hint``, off): every mbarrier wait of
      a warp-specialized kernel passes a suspend-time hint (tilecore.lower.pingpong.SUSPEND_NS),
      so a waiting warp is parked instead of re-polling (for A/B runs on the H200).
    - ``copy_interleave`` (``tilecore.enable_copy_interleave``): `fragment-pipeline` deals the
      copies of a later tile out among the last k step's mmas instead of issuing them in one
      burst after the barrier (off: the burst was 3-5% faster on the H200; for A/B runs).
    - ``copy_spread`` (``tilecore.copy_spread``): `fragment-pipeline` deals the copies of each
      k tile's head out over that iteration's k steps but the last, between each step's operand
      loads and its mmas (CUTLASS's multistage mainloop), instead of the burst after the barrier;
      pipelines of fewer than 3 stages keep the burst (off by default: on the H200 3% faster
      than the burst at 128x256x64 with 3 stages, a tie at the best configs; BENCHMARKS.md).
    - ``early_tma_prologue`` (``tilecore.early_tma_prologue``, off): the first tiles of a TMA
      pipeline without a producer warpgroup are issued before the statements ahead of the loop
      that cannot interact with them (a query tile's load), not right before the loop
      (tilecore.lower.early_prologue; for A/B runs of flash decoding).
    - ``tma_l2_promotion`` (``tilecore.tma_l2_promotion``: 128 or 256, default 128): the L2
      promotion of the kernel's TMA tensor maps (`CU_TENSOR_MAP_L2_PROMOTION_L2_128B` / `_256B`:
      an L2 miss of a TMA read fetches that many bytes); read by the cuda backend when it
      encodes the maps (tilecore_cuda.tensormap), for A/B runs of streaming kernels.
    - ``programmatic_launch`` (``tilecore.programmatic_launch``, off): on sm_90 and later the
      cuda backend starts the kernel with `griddepcontrol.wait` and launches it with programmatic
      stream serialization (programmatic dependent launch): the launch and block scheduling may
      overlap the end of the previous kernel in the stream, and no instruction after the wait
      runs before that kernel has completed and its memory is visible (the kernel's own
      semantics are unchanged; tilecore_cuda.render / launch).
    - ``index_bitwidth`` (TileLang's ``tl.config_index_bitwidth``: 32 or 64; default 0, decided
      per buffer): the width of global offsets (tilecore.lower.wide_offsets.offsets_are_wide).
      By default a buffer that may hold 2^31 elements or more gets int64 offsets; 64 gives them
      to every global buffer; 32 to none, so offsets past 2^31 wrap as int32 arithmetic does
      (the emulator reports such an access as out of bounds: tests/test_safety.py).
    - ``disable_safe_memory`` (TileLang's ``tl.disable_safe_memory_legalize``, off): element
      loads and stores of global tensors keep no bounds guards (tilecore.passes.safe_memory), so
      one outside its tensor is undefined, and interp / cpu / emu report it; `T.copy` stays
      predicated at tensor edges either way.
    """

    disable_tma_lower: bool = False
    disable_warp_specialized: bool = False
    disable_wgmma: bool = False
    disable_vectorize_256: bool = False
    fast_math: bool = False
    enable_async_copy: bool = True
    disable_vectorize: bool = False
    disable_thread_storage_sync: bool = False
    disable_fragment_pipeline: bool = False
    disable_tma_store: bool = False
    disable_wgmma_scale_d: bool = False
    disable_staged_swizzle: bool = False
    ws_pingpong: bool = False
    mbarrier_suspend_hint: bool = False
    warpgroup_turns: bool = False
    ws_persistent_any: bool = False
    copy_interleave: bool = False
    copy_spread: bool = False
    early_tma_prologue: bool = False
    tma_l2_promotion: int = 128
    programmatic_launch: bool = False
    index_bitwidth: int = 0
    disable_safe_memory: bool = False


# TileLang pass-config key -> Options field
HONOURED = {
    "tl.disable_tma_lower": "disable_tma_lower",
    "tl.disable_warp_specialized": "disable_warp_specialized",
    "tl.disable_wgmma": "disable_wgmma",
    "tl.disable_vectorize_256": "disable_vectorize_256",
    "tl.enable_async_copy": "enable_async_copy",
    "tl.enable_fast_math": "fast_math",
    "tirx.use_async_copy": "enable_async_copy",
    "tir.use_async_copy": "enable_async_copy",
    "tirx.disable_vectorize": "disable_vectorize",
    "tir.disable_vectorize": "disable_vectorize",
    "tl.disable_thread_storage_sync": "disable_thread_storage_sync",
    "tl.disable_safe_memory_legalize": "disable_safe_memory",
    "tl.config_index_bitwidth": "index_bitwidth",
    "tilecore.disable_fragment_pipeline": "disable_fragment_pipeline",
    "tilecore.disable_tma_store": "disable_tma_store",
    "tilecore.disable_wgmma_scale_d": "disable_wgmma_scale_d",
    "tilecore.disable_staged_swizzle": "disable_staged_swizzle",
    "tilecore.ws_pingpong": "ws_pingpong",
    "tilecore.mbarrier_suspend_hint": "mbarrier_suspend_hint",
    "tilecore.warpgroup_turns": "warpgroup_turns",
    "tilecore.ws_persistent_any": "ws_persistent_any",
    "tilecore.enable_copy_interleave": "copy_interleave",
    "tilecore.copy_spread": "copy_spread",
    "tilecore.early_tma_prologue": "early_tma_prologue",
    "tilecore.tma_l2_promotion": "tma_l2_promotion",
    "tilecore.programmatic_launch": "programmatic_launch",
}

# TileLang keys accepted without effect, with why (told once per process).
NOT_APPLIED = {
    "tl.disable_out_of_bound_warning": "tilecore has no out-of-bound warnings (accesses are "
                                       "predicated or raise on interp/emu)",
    "tl.Simplify": "tilecore's simplifier has no knobs",
    "tl.dynamic_alignment": "symbolic dimensions are not assumed aligned",
    "tl.disable_dynamic_tail_split": "tilecore does not split dynamic tails",
    "tl.ptxas_register_usage_level": "no compiler flags are taken from pass_configs",
    "tl.device_compile_flags": "no compiler flags are taken from pass_configs",
    "tl.debug_merge_shared_memory_allocations": "shared buffers are not merged",
    "tl.enable_aggressive_shared_memory_merge": "shared buffers are not merged",
    "tl.disable_shared_memory_reuse": "shared buffers are not merged",
    "tl.disable_shuffle_elect": "tilecore does not elect threads with shuffles",
    "tl.disable_loop_unswitching": "tilecore does not unswitch loops",
    "tl.disable_buffer_init_check": "interp and emu poison uninitialized memory instead",
    "tl.disable_data_race_check": "emu always checks races",
    "tl.force_let_inline": "tilecore does not inline lets",
    "tl.ast_print_enable": "use Kernel.get_ir(stage) or TILECORE_DUMP_IR",
    "tl.enable_dump_ir": "use TILECORE_DUMP_IR=1|<dir>",
    "tl.dump_ir_path": "use TILECORE_DUMP_IR=<dir>",
    "tl.layout_visualization_enable": "tilecore has no layout visualizer",
    "tl.layout_visualization_formats": "tilecore has no layout visualizer",
    "tirx.disable_cse_tir": "tilecore has no CSE pass",
    "tirx.enable_equiv_terms_in_cse_tir": "tilecore has no CSE pass",
    "tirx.disable_storage_rewrite": "tilecore has no storage rewrite",
    "tirx.noalias": "kernel parameters are always assumed not to alias",
    "tirx.enable_debug": "tilecore emits no debug information",
    "tirx.merge_static_smem": "shared buffers are not merged",
    "cuda.kernels_output_dir": "use Kernel.get_kernel_source()",
    "tl.disable_prelower_semantic_check": "tilecore's frontend checks are not optional",
}

# the options that take one of a few integers rather than a bool
CHOICES = {"tma_l2_promotion": (128, 256), "index_bitwidth": (32, 64)}

_warned: set[str] = set()


def _key_name(key) -> str:
    """A pass-config key as a string (str enums such as TileLang's PassConfigKey by value)."""
    value = getattr(key, "value", key)
    if not isinstance(value, str):
        raise TileError(f"a pass_configs key is a string like 'tl.disable_tma_lower', got {key!r}",
                        caller_loc(), hint="spell keys as strings (or tilelang PassConfigKey members)")
    return value


def options_from_pass_configs(pass_configs) -> Options:
    """`Options` for TileLang-style `pass_configs` (a mapping, or None for the defaults).

    Raises TileError for an unknown key, a non-bool value of a boolean option or a value outside
    an integer option's `CHOICES`; warns once
    (TileConfigWarning) per known key that tilecore does not apply."""
    if pass_configs is None:
        return Options()
    if isinstance(pass_configs, Options):
        return pass_configs
    if not hasattr(pass_configs, "items"):
        raise TileError(f"pass_configs must be a dict, got {type(pass_configs).__name__}", caller_loc(),
                        hint="pass_configs={'tl.disable_tma_lower': True}")
    fields: dict[str, bool | int] = {}
    for key, value in pass_configs.items():
        name = _key_name(key)
        field = HONOURED.get(name)
        if field in CHOICES:
            if isinstance(value, bool) or value not in CHOICES[field]:
                raise TileError(f"pass_configs[{name!r}] must be one of {CHOICES[field]}, got {value!r}",
                                caller_loc(), hint=f"give one of {CHOICES[field]}")
            fields[field] = value
            continue
        if field is not None:
            if not isinstance(value, bool):
                raise TileError(f"pass_configs[{name!r}] must be True or False, got {value!r}",
                                caller_loc(), hint="give a bool")
            fields[field] = value
            continue
        why = NOT_APPLIED.get(name)
        if why is not None:
            if name not in _warned:
                _warned.add(name)
                loc = caller_loc()
                warnings.warn_explicit(f"pass_configs key {name!r} has no effect in tilecore: {why}",
                                       TileConfigWarning, loc.file if loc else "<tilecore>",
                                       loc.line if loc else 0)
            continue
        known = ", ".join(sorted(HONOURED))
        raise TileError(f"unknown pass_configs key {name!r}", caller_loc(),
                        hint=f"tilecore honours {known}; see tilecore/options.py")
    return Options(**fields)

