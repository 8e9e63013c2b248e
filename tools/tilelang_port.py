"""Measure how much of TileLang's `examples/` tree runs on tilecore by an import swap.

    python tools/tilelang_port.py --git-dir /work/.mirror/tile-ai+tilelang/repo --ref v0.1.13
    python tools/tilelang_port.py --examples /tmp/tilelang-examples -k gemm --timeout 120

Nothing of TileLang is committed here: the examples are extracted (`git archive`) into a scratch
folder outside the repository. Each example runs in its own subprocess, as a TileLang user would
port it to a machine without a GPU:

* `import tilelang...` resolves to `import tilecore...` (a meta-path alias, equivalent to editing
  the imports: `tilelang.X` is `tilecore.X`; a name tilecore lacks fails like a missing import),
  and `tvm` (TileLang's bundled TVM) to `tilecore.tvm`;
* every compile runs on `interp` (TILECORE_TARGET_OVERRIDE), whatever target the example names;
* torch's `device="cuda"` / `.cuda()` stay on the CPU (the only torch here), `torch.cuda.*`
  bookkeeping calls are no-ops and `torch.cuda.Event` reads the host clock;
* shapes shrink where the example exposes them as its driver's arguments: int literals >= 1024 in
  module-level assignments (`M, N, K = 4096, 4096, 4096`), in the defaults of `main()` and of
  the other functions the `__main__` block calls (`seq_len=32 * 1024` too), in the
  `if __name__ == "__main__":` block and in `argparse` defaults are
  divided by 16 and rounded down to a multiple of 256 (at least 256), lists of such sizes in
  a driver's body (`batch_sizes = [2048, 6144]`) are divided by 16 exactly, sizes a driver's
  loop sweeps (`for n in [1024, 8192]:`) shrink by the first rule, batch-like
  arguments become at most 2 and head counts >= 32 a quarter (at least 16). Other shapes
  fixed inside a kernel or a driver's body are left alone. When a run at the smaller shapes
  errors (an exception, or one of the example's own assertions on its sizes), the example runs
  again at a quarter of its sizes with its own head counts (TLPORT_SHRINK=4), then as written,
  in the time left.

An example passes when it runs to the end (each example checks itself against its own reference,
mostly `torch.testing.assert_close` or `profiler.assert_allclose`); `fail` is a wrong answer (an
AssertionError from a testing function, or an `assert` about closeness/equality/errors), `error`
any other exception (an `assert` on the example's own sizes included), `timeout` past
--timeout. The runnable set is every example file with a kernel (`T.Kernel`) and a `__main__`
block, except ones for other hardware (AMD, sm100/sm120, iket/analyze CUDA tooling), the
deliberately buggy input of TileLang's delta debugger (`autodd/`), or needing packages absent
here (triton, fla): see `excluded()`. The examples also import `einops` and `tqdm` (34 files);
install them first (`pip install einops tqdm`), or those files count as errors at their imports.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RESULT = "TLPORT-RESULT:"
HARDWARE = re.compile(r"(^|/)(amd|iket|analyze)(/|$)|sm100|sm120|cdna|rocm|_amd")
MISSING_PKGS = ("triton", "fla", "FLA_KDA", "bitblas", "flash_attn")
BATCH_NAMES = {"batch", "batch_size", "bs", "b", "BATCH", "B"}
# head counts: a quarter (at least 16, which every example's head-group ratio divides)
HEAD_NAMES = {"heads", "h", "H", "num_heads", "nheads", "n_heads", "head_num", "num_head"}


# ---------------------------------------------------------------------------------- discovery
def extract(git_dir: str, ref: str, dest: Path) -> Path:
    """`git archive <ref> examples` of a bare TileLang mirror into `dest`; returns the examples dir."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as tmp:
        subprocess.run(["git", f"--git-dir={git_dir}", "archive", ref, "examples"], stdout=tmp,
                       check=True)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(dest, filter="data")
    return dest / "examples"


def excluded(path: Path, root: Path) -> str | None:
    """Why an example file is outside the runnable set, or None when it is in it."""
    rel = path.relative_to(root).as_posix()
    src = path.read_text(errors="replace")
    if "T.Kernel" not in src or not re.search(r"__name__\s*==\s*['\"]__main__['\"]", src):
        return "no kernel or no __main__"
    if path.name.startswith("test_") or path.name == "conftest.py":
        return "a test file"
    if HARDWARE.search(rel) or re.search(r"^\s*(from|import) tilelang\.(rocm|tools)\b", src, re.M):
        return "other hardware"
    if rel.startswith("autodd/"):
        return "a deliberately failing input of TileLang's delta debugger (autodd)"
    # the example's own helper modules (same folder) count as part of it
    local = [src] + [(path.parent / f"{m}.py").read_text(errors="replace")
                     for m in re.findall(r"^\s*from (\w+) import", src, re.M)
                     if (path.parent / f"{m}.py").is_file()]
    for pkg in MISSING_PKGS:
        if any(re.search(rf"^\s*(from|import) {pkg}[\s.]", s, re.M) for s in local):
            return f"needs {pkg}"
    return None


def runnable(root: Path) -> list[Path]:
    """The runnable example files under `root`, sorted."""
    return [p for p in sorted(root.rglob("*.py")) if excluded(p, root) is None]


# ---------------------------------------------------------------------------------- the child
class _Alias:
    """Meta-path finder: `tilelang[.x]` is `tilecore[.x]` (the import swap)."""

    def find_spec(self, name, path=None, target=None):
        """A spec whose loader returns the tilecore module of the same dotted tail. `tvm` in a
        TileLang program is TileLang's bundled TVM, whose port is `tilecore.tvm`."""
        if name not in ("tilelang", "tvm") and not name.startswith(("tilelang.", "tvm.")):
            return None
        import importlib.machinery
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        """The real tilecore module (import errors name the tilecore module that is missing)."""
        import importlib
        if spec.name == "tvm" or spec.name.startswith("tvm."):
            return importlib.import_module("tilecore.tvm" + spec.name[len("tvm"):])
        return importlib.import_module("tilecore" + spec.name[len("tilelang"):])

    def exec_module(self, module):
        """Nothing to run: the tilecore module is already imported."""


def _patch_torch() -> None:
    """Keep `cuda` tensors on the CPU: this machine's torch has no CUDA."""
    import functools

    import torch

    def cpu(dev):
        s = str(dev) if dev is not None else ""
        return "cpu" if s.startswith("cuda") else dev

    def wrap(f):
        @functools.wraps(f)
        def g(*a, **k):
            if "device" in k:
                k["device"] = cpu(k["device"])
            return f(*a, **k)
        return g

    for n in ("randn", "rand", "zeros", "ones", "empty", "full", "arange", "tensor", "randint",
              "randn_like", "rand_like", "zeros_like", "ones_like", "empty_like", "full_like",
              "randint_like", "randperm", "linspace", "eye", "as_tensor", "normal", "empty_strided",
              "tril", "triu", "multinomial", "from_numpy", "cat", "stack"):
        if hasattr(torch, n):
            setattr(torch, n, wrap(getattr(torch, n)))
    to = torch.Tensor.to

    def to_(self, *a, **k):
        a = tuple(cpu(x) if isinstance(x, (str, torch.device)) else x for x in a)
        if "device" in k:
            k["device"] = cpu(k["device"])
        return to(self, *a, **k)

    torch.Tensor.to = to_
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.nn.Module.cuda = lambda self, *a, **k: self
    gen = torch.Generator

    class Generator(gen):
        """torch.Generator(device="cuda") makes a CPU generator."""

        def __new__(cls, device="cpu"):
            return gen(device=cpu(device))

    torch.Generator = Generator

    class Props:
        """torch.cuda.get_device_properties: an H100-like device's numbers the examples read."""

        multi_processor_count = 132
        name = "interp"
        total_memory = 80 << 30
        major, minor = 9, 0

    c = torch.cuda
    c.get_device_properties = lambda *a, **k: Props()
    c.synchronize = lambda *a, **k: None
    c.manual_seed = c.manual_seed_all = lambda *a, **k: None
    c.empty_cache = lambda *a, **k: None
    c.current_device = lambda: 0
    c.set_device = lambda *a, **k: None
    c.get_device_capability = lambda *a, **k: (9, 0)
    c.get_device_name = lambda *a, **k: "interp"
    c.is_available = lambda: True
    c.device_count = lambda: 1

    class Stream:
        """torch.cuda.Stream on the CPU: work runs in program order (one stream)."""

        def __init__(self, *a, **k):
            pass

        def synchronize(self):
            pass

        def wait_stream(self, other):
            pass

        def record_event(self, event=None):
            return event

        def wait_event(self, event):
            pass

    class Event:
        """torch.cuda.Event on the CPU: `record` takes the host clock (work runs synchronously,
        so the interval between two records is the work between them)."""

        def __init__(self, *a, **k):
            self.t = None

        def record(self, stream=None):
            self.t = time.perf_counter()

        def synchronize(self):
            pass

        def query(self):
            return True

        def wait(self, stream=None):
            pass

        def elapsed_time(self, end):
            if self.t is None or end.t is None:
                raise RuntimeError("Event.elapsed_time: both events must be recorded first")
            return (end.t - self.t) * 1e3

    import contextlib

    c.Event = Event
    c.Stream = Stream
    c.default_stream = c.current_stream = lambda *a, **k: Stream()
    c.stream = lambda s=None: contextlib.nullcontext(s)


def _factor() -> int:
    return int(os.environ.get("TLPORT_SHRINK", "16"))


def _shrink_int(v: int) -> int:
    # 512 and below are often head or feature dimensions an example's asserts depend on; a
    # multiple of 256 keeps a shrunk dimension a multiple of the examples' block sizes
    return max(256, v // _factor() // 256 * 256) if v >= 1024 else v


class _ShrinkExact(ast.NodeTransformer):
    """Sizes in a list (`batch_sizes = [2048, 6144]`): a 16th each (at least 1), so a list that
    adds up to a shrunk dimension (8192 -> 512) still does."""

    def visit_Constant(self, node):
        """An int literal >= 1024 becomes a 16th of itself."""
        if type(node.value) is int and node.value >= 1024 and not getattr(node, "shrunk", False):
            node.value = max(1, node.value // _factor())
            node.shrunk = True
        return node


class _Shrink(ast.NodeTransformer):
    """Smaller int literals (see the module docstring) in a driver's arguments."""

    def visit_Constant(self, node):
        """An int literal >= 512 becomes a 16th of itself (at least 256)."""
        if type(node.value) is int and not getattr(node, "shrunk", False):
            if _shrink_int(node.value) != node.value:
                node.value = _shrink_int(node.value)
                node.shrunk = True  # an argparse default inside the __main__ block: once only
        return node


def _shrink_tree(tree: ast.Module) -> ast.Module:
    """Shrink module-level sizes, the defaults of main() and of the other functions the __main__
    block calls (drivers), the __main__ block and argparse defaults; batch args to <= 2.
    Inside a driver's body, lists of sizes (`batch_sizes = [2048, 6144]`) shrink with them, so
    sizes that must add up to a shrunk dimension still do."""
    for node in tree.body:  # module-level sizes (`M, N, K = 4096, 4096, 4096`)
        if isinstance(node, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple)) for t in node.targets):
            _Shrink().visit(node.value)
    drivers = {"main"} | _main_block_calls(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in drivers:
            a = node.args
            pos = a.posonlyargs + a.args
            pairs = list(zip(pos[len(pos) - len(a.defaults):], a.defaults))
            pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
            for arg, d in pairs:
                _shrink_default(d, arg.arg)
            for st in ast.walk(node):
                if isinstance(st, ast.Assign) and isinstance(st.value, (ast.List, ast.Tuple)) \
                        and all(isinstance(e, ast.Constant) and type(e.value) is int
                                for e in st.value.elts):
                    for e in st.value.elts:
                        _ShrinkExact().visit(e)
                elif isinstance(st, ast.For) and isinstance(st.iter, (ast.List, ast.Tuple)):
                    _Shrink().visit(st.iter)  # `for n in [512, 1024, 8192]:` a sweep of sizes
        elif isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            for s in node.body:
                _Shrink().visit(s)
                for c in ast.walk(s):
                    if isinstance(c, ast.Call):
                        for kw in c.keywords:
                            if kw.arg in BATCH_NAMES | HEAD_NAMES:
                                _shrink_default(kw.value, kw.arg)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flag = next((a.value for a in node.args if isinstance(a, ast.Constant)), "")
            for kw in node.keywords:
                if kw.arg == "default":
                    _shrink_default(kw.value, str(flag).lstrip("-"))
    return ast.fix_missing_locations(tree)


def _main_block_calls(tree: ast.Module) -> set[str]:
    """Names of the module's functions the `if __name__ == "__main__":` block calls directly
    (`test_topk_selector()`): drivers like `main`, whose defaults are the example's sizes."""
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    called: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            called |= {c.func.id for c in ast.walk(node)
                       if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    return called & defined


def _shrink_default(d, name: str) -> None:
    if isinstance(d, ast.BinOp):  # `seq_len=32 * 1024`: its large literals shrink
        _Shrink().visit(d)
        return
    if isinstance(d, ast.Constant) and type(d.value) is int and not getattr(d, "shrunk", False):
        if name in BATCH_NAMES:
            d.value = min(d.value, 2)
        elif name in HEAD_NAMES and d.value >= 32 and _factor() == 16:  # the retry keeps heads
            d.value = max(16, d.value // 4)
        else:
            d.value = _shrink_int(d.value)
        d.shrunk = True


def child(path: Path) -> int:
    """Run one example (in this process) and print its result line."""
    import traceback
    import types

    os.environ["TILECORE_TARGET_OVERRIDE"] = os.environ.get("TLPORT_TARGET", "interp")
    sys.meta_path.insert(0, _Alias())
    deps = os.environ.get("TLPORT_DEPS")
    sys.path[:0] = [str(path.parent)] + ([deps] if deps else [])
    os.chdir(path.parent)
    sys.argv = [str(path)]
    try:
        _patch_torch()
    except ImportError:
        pass
    src = path.read_text()
    tree = ast.parse(src, str(path))
    if not os.environ.get("TLPORT_AS_WRITTEN"):
        tree = _shrink_tree(tree)
    code = compile(tree, str(path), "exec")
    mod = types.ModuleType("__main__")
    mod.__file__ = str(path)
    sys.modules["__main__"] = mod
    try:
        exec(code, mod.__dict__)  # noqa: S102 - running the example is the point
    except SystemExit as e:
        if e.code not in (None, 0):
            print(f"{RESULT} error SystemExit({e.code})", flush=True)
            return 1
    except BaseException as e:  # noqa: BLE001 - every failure is reported, none escapes
        traceback.print_exc()
        tb = traceback.extract_tb(e.__traceback__)
        kind = "fail" if isinstance(e, AssertionError) and _is_check(e, tb) else "error"
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)
                      if f.filename == str(path)), "")
        msg = (str(e).strip().splitlines() or [""])[0][:400]
        print(f"{RESULT} {kind} {type(e).__name__}: {msg} [{where}]", flush=True)
        return 1
    print(f"{RESULT} pass", flush=True)
    return 0


_CHECK_WORDS = re.compile(r"close|similar|equal|match|differ|diff|err|Tensor-likes|allclose|"
                          r"correct", re.I)


def _is_check(e: AssertionError, tb) -> bool:
    """Whether an AssertionError is a result check (a wrong answer) rather than one of the
    example's own preconditions on its sizes (`assert seq_len >= topk`): raised by a testing
    function (torch.testing, tilecore's profiler or testing), or by an assert whose message or
    line talks about closeness/equality/errors."""
    if any(("torch/testing" in f.filename or "/tilecore/" in f.filename) for f in tb):
        return True
    last = tb[-1] if tb else None
    return bool(_CHECK_WORDS.search(str(e)) or (last is not None and _CHECK_WORDS.search(last.line or "")))


# ---------------------------------------------------------------------------------- the parent
def run_one(path: Path, timeout: float) -> tuple[str, str, float]:
    """(status, first error line, seconds) of one example. When the shrunk run fails other than
    by a wrong answer (the smaller shapes may break one of the example's own preconditions, e.g.
    a buffer sized by one argument indexed by another), it runs again at the example's own
    shapes in the time left; the first failure is the one reported."""
    t0 = time.time()
    status, detail, _ = _run_once(path, timeout, {})
    if status != "error":  # a pass, a wrong answer or a timeout: larger shapes would not help
        return status, detail, time.time() - t0
    for env, how in (({"TLPORT_SHRINK": "4"}, "a quarter of the example's shapes"),
                     ({"TLPORT_AS_WRITTEN": "1"}, "the example's own shapes")):
        left = timeout - (time.time() - t0)
        if left <= 10:
            break
        s2, _, _ = _run_once(path, left, env)
        if s2 == "pass":
            return "pass", f"(at {how})", time.time() - t0
    return status, detail, time.time() - t0


def _run_once(path: Path, timeout: float, env: dict) -> tuple[str, str, float]:
    t0 = time.time()
    try:
        p = subprocess.run([sys.executable, __file__, "--one", str(path)], capture_output=True,
                           text=True, timeout=timeout, env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        return "timeout", f"over {timeout:.0f} s", time.time() - t0
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith(RESULT)]
    if not lines:
        tail = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return "error", f"crashed (rc {p.returncode}): {tail[:160]}", time.time() - t0
    status, _, detail = lines[-1][len(RESULT):].strip().partition(" ")
    return status, detail, time.time() - t0


def names_table(files: list[Path]) -> str:
    """A markdown table of the TileLang names the examples use (`T.x`, `tilelang.x.y`, `from
    tilelang.x import y`), how many files use each, and whether tilecore has it."""
    import importlib
    import inspect

    uses: dict[str, set] = {}
    for f in files:
        src = f.read_text(errors="replace")
        # not preceded by a name or `.`: `b.T.to(...)` is torch's transpose, not TileLang's T
        found = {"T." + n for n in re.findall(r"(?<![\w.])T\.([A-Za-z_]\w*)", src)}
        found |= {"tilelang." + n for n in re.findall(r"(?<![\w.])tilelang\.([A-Za-z_][\w.]*[\w])", src)}
        for mod, names in re.findall(r"^\s*from (tilelang(?:\.[\w.]+)?) import \(?([\w, ]+)",
                                     src, re.M):
            found |= {f"{mod}.{n.split(' as ')[0].strip()}" for n in names.split(",") if n.strip()}
        for n in found:
            uses.setdefault(n, set()).add(f.name)

    def has(name: str) -> bool:
        parts = name.split(".")
        base = "tilecore.language" if parts[0] == "T" else "tilecore"
        obj = importlib.import_module(base)
        path = base  # the dotted module path while every step so far is a module
        for p in parts[1:]:
            if hasattr(obj, p):
                obj = getattr(obj, p)
            elif path is not None:
                try:
                    obj = importlib.import_module(f"{path}.{p}")
                except ImportError:
                    return False
            else:
                return False
            path = f"{path}.{p}" if path is not None and inspect.ismodule(obj) else None
        return True

    rows = sorted(uses.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    out = ["| name | example files | in tilecore |", "|---|---|---|"]
    out += [f"| `{n}` | {len(fs)} | {'yes' if has(n) else '**no**'} |" for n, fs in rows]
    return "\n".join(out)


def main() -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=Path, help="an extracted TileLang examples/ folder")
    ap.add_argument("--git-dir", help="a TileLang git dir to extract examples/ from (with --ref)")
    ap.add_argument("--ref", default="v0.1.13")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "tlport")
    ap.add_argument("-k", default="", help="only examples whose path contains this")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--list", action="store_true", help="list the runnable set and the excluded")
    ap.add_argument("--names", action="store_true",
                    help="a markdown table of the TileLang names the runnable set uses")
    ap.add_argument("--rerun", type=Path, help="a previous table: run only what did not pass")
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        return child(a.one.resolve())
    root = a.examples
    if root is None:
        if not a.git_dir:
            ap.error("give --examples DIR or --git-dir GIT_DIR")
        root = extract(a.git_dir, a.ref, a.scratch / a.ref)
    root = root.resolve()
    if a.list:
        for p in sorted(root.rglob("*.py")):
            why = excluded(p, root)
            if why != "no kernel or no __main__":
                print(f"{'RUN' if why is None else 'skip'}  {p.relative_to(root)}  {why or ''}")
        return 0
    files = [p for p in runnable(root) if a.k in p.relative_to(root).as_posix()]
    if a.rerun:  # only the examples a previous table did not pass
        done = {ln.split()[2] for ln in a.rerun.read_text().splitlines()
                if ln.startswith("pass ") and len(ln.split()) > 2}
        files = [p for p in files if p.relative_to(root).as_posix() not in done]
    if a.names:
        print(names_table(files))
        return 0
    def one(p):
        r = run_one(p, a.timeout)
        print(f"  .. {r[0]:8s} {p.relative_to(root).as_posix()} {r[1]}", file=sys.stderr, flush=True)
        return r

    with ThreadPoolExecutor(max(1, a.jobs)) as ex:
        results = list(ex.map(one, files))
    counts: dict[str, int] = {}
    for p, (status, detail, secs) in zip(files, results):
        counts[status] = counts.get(status, 0) + 1
        print(f"{status:8s} {secs:6.1f}s  {p.relative_to(root).as_posix():70s} {detail}")
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    print(f"\n{counts.get('pass', 0)} of {len(files)} pass ({summary})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
