"""Where autotuning results live and what they depend on: a JSON store keyed by hash, and
the device and backend facts that go into the key (`tilecore.autotuner`)."""

from __future__ import annotations

import json
import os
import platform
import tempfile
from pathlib import Path

# --------------------------------------------------------------------------- the JSON store


def _shared_store():
    """`tilecore.cache.Store("autotune")` when the compile cache module is installed (its
    `get_json` / `put_json`: atomic, checksummed, LRU-capped), else None (the files below)."""
    try:
        from . import cache
    except ImportError:
        return None
    store = getattr(cache, "Store", None)
    return store("autotune") if store is not None else None


def cache_root() -> Path:
    """`$TILECORE_CACHE_DIR/autotune`, else `~/.cache/tilecore/autotune`."""
    root = os.environ.get("TILECORE_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "tilecore") / "autotune"


def store_get(key: str) -> dict | None:
    """The record stored under `key`, or None (also for an unreadable or foreign file)."""
    shared = _shared_store()
    if shared is not None:
        rec = shared.get_json(key)
    else:
        try:
            with open(cache_root() / f"{key}.json", encoding="utf-8") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            return None
    return rec if isinstance(rec, dict) and rec.get("key") == key else None


def store_put(key: str, record: dict) -> None:
    """Write `record` under `key` atomically: a temporary file in the same folder, then
    `os.replace`, so a concurrent reader sees the old file or the new one, never a part."""
    record = json.loads(json.dumps(dict(record, key=key), default=repr))  # JSON values only
    shared = _shared_store()
    if shared is not None:
        shared.put_json(key, record)
        return
    d = cache_root()
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=f".{key}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1, sort_keys=True)
        os.replace(tmp, d / f"{key}.json")
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise



def device_name(kind: str) -> str:
    """The device a kind's kernels run on, for the cache key: the GPU's name for CUDA/ROCm
    targets (torch is imported only for them), the host's machine and processor otherwise."""
    if kind in ("cuda", "hip"):
        try:
            import torch

            if torch.cuda.is_available():
                return torch.cuda.get_device_name(torch.cuda.current_device())
        except Exception:  # no device: the name says so, the key still differs from a GPU's
            return f"{kind}:unavailable"
    return f"{platform.machine()} {platform.processor()}".strip()


def backend_version(kind: str) -> str:
    """The installed version of the distribution serving `kind` (tilecore-<kind>), or ''."""
    from importlib import metadata

    base = kind.split("-")[0]
    for name in (f"tilecore-{kind}", f"tilecore-{base}"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return ""
