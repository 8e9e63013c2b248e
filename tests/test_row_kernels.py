"""The row kernels' single-pass form lowers to registers, shuffles and one shared exchange per
reduction (no staging of the row through shared memory), and tools/sass_counts.py reads SASS."""

import importlib
import importlib.util
import re
import sys
from pathlib import Path

import pytest

import tilecore

ROOT = Path(__file__).resolve().parent.parent
ROWS = ["softmax", "rmsnorm", "layernorm"]


def _cuda_source(name, **params):
    pytest.importorskip("tilecore_cuda")
    mod = importlib.import_module(name)
    kernel = tilecore.compile(mod.program(**params), out_idx=mod.OUT_IDX, target="cuda:sm_90a")
    return kernel.get_kernel_source()


@pytest.mark.parametrize("name", ROWS)
def test_single_pass_keeps_the_row_in_registers(name):
    src = _cuda_source(name, M=16384, N=8192)
    # X read once, in vectors: 8-byte (4 halves) or 16-byte (8 halves) loads cover the 32
    # elements each of the 256 threads holds
    halves = 4 * src.count("reinterpret_cast<const uint2*>(&X[") + \
        8 * src.count("reinterpret_cast<const uint4*>(&X[")
    assert halves == 8192 // 256
    assert "_staged" not in src  # a fragment staged through shared memory: the slow reduce path
    assert "k < 8192" not in src  # no thread loops over the row
    assert "__shfl_xor_sync" in src


@pytest.mark.parametrize("name", ROWS)
def test_long_rows_take_the_two_pass_kernel(name):
    src = _cuda_source(name, M=64, N=65536)
    # two passes of 4096-wide tiles over the row
    assert len(re.findall(r"for \(int (k\w*) = 0; \1 < 16; \1\+\+\)", src)) == 2


def _sass_counts():
    spec = importlib.util.spec_from_file_location("sass_counts", ROOT / "tools" / "sass_counts.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sass_counts"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_sass_counts_reads_opcodes_and_predicates():
    sass = """
        /*0080*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;   /* 0x000 */
        /*0090*/              @!P3 LDG.E.64.CONSTANT R10, desc[UR6][R8.64+0x3000] ;
        /*00a0*/                   LDGSTS.E.BYPASS.LTC128B.128 [R5], desc[UR4][R2.64] ;
        /*00b0*/                   HMMA.16816.F32 R8, R12, R16, R8 ;
        /*00c0*/                   LDSM.16.M88.4 R12, [R3] ;
        /*00d0*/                   STL.64 [R1], R14 ;
        /*00e0*/               @P0 STG.E.128 desc[UR4][R2.64], R4 ;
        /*00f0*/                   STG.E desc[UR4][R2.64], R4 ;
        /*0100*/                   CALL.REL.NOINC 0x1460 ;
        /*0110*/              @UP0 UTMALDG.2D [UR8], [UR4] ;
        /*0120*/                   UTMASTG.2D [UR4], [UR6] ;
        /*0130*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R3+URZ], R2 ;
    """
    c = _sass_counts().count_sass(sass)
    assert c["LDG.E.128"] == 1 and c["LDG.E.64"] == 1 and c["LDG"] == 2
    assert c["LDGSTS"] == 1 and c["HMMA"] == 1 and c["LDSM"] == 1 and c["HGMMA"] == 0
    assert c["STL"] == 1 and c["LDL"] == 0
    assert c["STG.E.128"] == 1 and c["STG"] == 2 and c["CALL"] == 1
    assert c["UTMALDG"] == 1 and c["UTMASTG"] == 1 and c["SYNCS"] == 1 and c["STSM"] == 0


def test_sass_counts_plan_defaults_without_bench_json(tmp_path):
    plan = _sass_counts().bench_plan(str(tmp_path / "missing.json"))
    names = [n for n, _ in plan]
    assert names == ["gemm", "flash_attention", "flash_attention", "softmax", "rmsnorm", "layernorm"]
    assert plan[0][1]["M"] == 4096 and plan[1][1]["is_causal"] is False and plan[2][1]["is_causal"] is True
