"""tilecore's key/value cache: compiled kernels, cubins, autotuning results.

One small API that every part of tilecore (and a backend, or the autotuner) stores through::

    from tilecore import cache
    store = cache.Store("autotune")                 # $TILECORE_CACHE_DIR/autotune/
    key = cache.digest("matmul", (4096, 4096), "cuda:sm_90a")
    store.put_json(key, {"block_M": 128})           # atomic, checksummed
    store.get_json(key)                             # -> {"block_M": 128}, or None

- **Where**: ``$TILECORE_CACHE_DIR/<namespace>/``, else ``$XDG_CACHE_HOME/tilecore`` or
  ``~/.cache/tilecore``; directories are created with mode 0700 (per user).
- **What**: bytes, JSON values, or a *record* (a JSON object plus named binary blobs, for a
  compiled kernel: its launch description and its cubin). Nothing is ever unpickled or
  executed from a file: a damaged or hostile entry can at worst be rejected or give wrong data
  for its key, never run code. (numba's own cache, used by the cpu target, *does* use pickle:
  a cpu cache directory must be trusted like code.)
- **Integrity**: every file carries a magic, a format version, the payload's length and its
  SHA-256; a truncated, garbage or foreign file is deleted, reported once per store as a
  :class:`TileCacheWarning`, and the caller rebuilds (``get`` returns None).
- **Concurrency**: writes go to a temporary file in the same directory and are renamed into
  place (``os.replace``), so readers see a whole entry or none and concurrent writers of one
  key simply race to identical content.
- **Size**: each store is capped (``TILECORE_CACHE_MAX_MB``, default 1024 MiB per namespace)
  and evicts least-recently-used entries after a write; a hit refreshes the entry's mtime,
  which is what recency means here.
- **In memory**: each store keeps the last ``memory_entries`` values read or written, so a
  process asking twice reads the disk once.
- A cache path that is not a usable directory (a file, no permission) disables the disk part
  for that store with one warning; tilecore keeps working uncached.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings
from collections import OrderedDict
from pathlib import Path

ENV_DIR = "TILECORE_CACHE_DIR"
ENV_MAX_MB = "TILECORE_CACHE_MAX_MB"
DEFAULT_MAX_MB = 1024
MAGIC = b"TCC1"  # tilecore cache, file format 1
_HEADER = struct.Struct("<4sQ32s")  # magic, payload length, sha256(payload)
_SUFFIX = ".tcc"


class TileCacheWarning(UserWarning):
    """A cache entry or directory was unusable (it is ignored, deleted where possible, rebuilt)."""


def root() -> Path:
    """The cache root: ``$TILECORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tilecore``, else
    ``~/.cache/tilecore``. Not created here."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "tilecore"


def digest(*parts) -> str:
    """A hex SHA-256 over `parts` (str, bytes, or anything with a deterministic ``repr``),
    unambiguous: each part is length-prefixed, so ("ab", "c") and ("a", "bc") differ."""
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else (p if isinstance(p, str) else repr(p)).encode()
        h.update(struct.pack("<Q", len(b)))
        h.update(b)
    return h.hexdigest()


def ensure_dir(path: Path) -> bool:
    """Create `path` and every missing parent with mode 0700 (a per-user cache: other users
    can neither read entries nor plant them); False when it is not a usable directory."""
    path = Path(path)
    try:
        missing = []
        p = path
        while not p.exists() and p != p.parent:
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            try:
                d.mkdir(mode=0o700)
            except FileExistsError:  # a concurrent creator
                pass
    except OSError:
        return False
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def encode(payload: bytes) -> bytes:
    """A cache file's bytes for `payload`: header (magic, length, checksum) then the payload."""
    return _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload


def decode(data: bytes) -> bytes | None:
    """The payload of a cache file's bytes, or None when they are not a whole, intact entry."""
    if len(data) < _HEADER.size:
        return None
    magic, n, check = _HEADER.unpack_from(data)
    payload = data[_HEADER.size:]
    if magic != MAGIC or n != len(payload) or hashlib.sha256(payload).digest() != check:
        return None
    return payload


def pack_record(meta: dict, blobs: dict[str, bytes] | None = None) -> bytes:
    """A record as bytes: a JSON object (`meta`) plus named binary blobs, no pickle."""
    blobs = blobs or {}
    index, offset = {}, 0
    for name, b in blobs.items():
        index[name] = [offset, len(b)]
        offset += len(b)
    head = json.dumps({"meta": meta, "blobs": index}, sort_keys=True, separators=(",", ":")).encode()
    return struct.pack("<Q", len(head)) + head + b"".join(blobs.values())


def unpack_record(payload: bytes) -> tuple[dict, dict[str, bytes]] | None:
    """(meta, blobs) of a packed record, or None when it is malformed."""
    try:
        (n,) = struct.unpack_from("<Q", payload)
        head = json.loads(payload[8:8 + n])
        body = payload[8 + n:]
        blobs = {}
        for name, (off, size) in head["blobs"].items():
            if off < 0 or size < 0 or off + size > len(body):
                return None
            blobs[name] = body[off:off + size]
        meta = head["meta"]
    except (struct.error, ValueError, KeyError, TypeError):
        return None
    return (meta, blobs) if isinstance(meta, dict) else None


class Store:
    """One namespace of the cache: ``get``/``put`` bytes by key, plus JSON and record forms.

    Keys are strings of letters, digits, ``-`` and ``_`` (use :func:`digest`); `max_bytes`
    caps the namespace's files (default ``$TILECORE_CACHE_MAX_MB`` MiB); `directory`
    overrides ``root() / namespace``. The directory is resolved on first use, so a store
    created at import time honours a later ``TILECORE_CACHE_DIR``."""

    def __init__(self, namespace: str, max_bytes: int | None = None, directory: str | Path | None = None,
                 memory_entries: int = 64):
        self.namespace = namespace
        self._max_bytes = max_bytes
        self._directory = Path(directory) if directory is not None else None
        self._memory: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self._memory_entries = memory_entries
        self._lock = threading.Lock()
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ location
    @property
    def directory(self) -> Path:
        """Where this namespace's files are (``root() / namespace`` unless given)."""
        return self._directory if self._directory is not None else root() / self.namespace

    @property
    def max_bytes(self) -> int:
        """The size cap in bytes."""
        if self._max_bytes is not None:
            return self._max_bytes
        try:
            return int(float(os.environ.get(ENV_MAX_MB, DEFAULT_MAX_MB)) * (1 << 20))
        except ValueError:
            return DEFAULT_MAX_MB << 20

    def path(self, key: str) -> Path:
        """The file holding `key`."""
        if not key or not all(c.isalnum() or c in "-_" for c in key):
            raise ValueError(f"cache key {key!r} must be letters, digits, '-' or '_' (use cache.digest)")
        return self.directory / (key + _SUFFIX)

    def _warn(self, kind: str, message: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, TileCacheWarning, stacklevel=3)

    # ------------------------------------------------------------------ bytes
    def get(self, key: str) -> bytes | None:
        """The bytes stored under `key`, or None (absent, or a damaged entry, now deleted)."""
        path = self.path(key)
        mkey = (str(path.parent), key)
        with self._lock:
            hit = self._memory.get(mkey)
            if hit is not None:
                self._memory.move_to_end(mkey)
                return hit
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            self._warn("read", f"tilecore cache: cannot read {path} ({e}); compiling without it")
            return None
        payload = decode(data)
        if payload is None:
            self._warn("corrupt", f"tilecore cache: {path} is damaged (truncated or not a tilecore "
                       "cache file); deleted, the entry is rebuilt")
            self._remove(path)
            return None
        try:
            os.utime(path)  # recency for LRU eviction
        except OSError:
            pass
        self._remember(mkey, payload)
        return payload

    def put(self, key: str, data: bytes) -> bool:
        """Store `data` under `key` atomically; False when the disk part is unusable (the value
        is still remembered in memory). Evicts least-recently-used entries over the cap."""
        path = self.path(key)
        self._remember((str(path.parent), key), bytes(data))
        d = path.parent
        if not ensure_dir(d):
            self._warn("dir", f"tilecore cache: {d} is not a writable directory; caching in memory "
                       f"only (set {ENV_DIR} to a directory)")
            return False
        try:
            fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".part")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(encode(bytes(data)))
                os.replace(tmp, path)
            except BaseException:
                self._remove(Path(tmp))
                raise
        except OSError as e:
            self._warn("write", f"tilecore cache: cannot write {path} ({e}); caching in memory only")
            return False
        self.evict()
        return True

    def delete(self, key: str) -> None:
        """Forget `key` (memory and disk)."""
        path = self.path(key)
        with self._lock:
            self._memory.pop((str(path.parent), key), None)
        self._remove(path)

    def clear_memory(self) -> None:
        """Drop the in-memory layer (the disk entries stay): what a new process would see."""
        with self._lock:
            self._memory.clear()

    # ------------------------------------------------------------------ JSON and records
    def get_json(self, key: str):
        """The JSON value stored under `key`, or None."""
        data = self.get(key)
        if data is None:
            return None
        try:
            return json.loads(data)
        except ValueError:
            self.delete(key)
            return None

    def put_json(self, key: str, value) -> bool:
        """Store a JSON-serialisable `value` under `key`."""
        return self.put(key, json.dumps(value, sort_keys=True).encode())

    def get_record(self, key: str) -> tuple[dict, dict[str, bytes]] | None:
        """(meta, blobs) stored under `key` by :meth:`put_record`, or None."""
        data = self.get(key)
        if data is None:
            return None
        rec = unpack_record(data)
        if rec is None:
            self._warn("corrupt", f"tilecore cache: {self.path(key)} holds a malformed record; "
                       "deleted, the entry is rebuilt")
            self.delete(key)
        return rec

    def put_record(self, key: str, meta: dict, blobs: dict[str, bytes] | None = None) -> bool:
        """Store a JSON object plus named binary blobs under `key`."""
        return self.put(key, pack_record(meta, blobs))

    # ------------------------------------------------------------------ size
    def entries(self) -> list[tuple[Path, int, float]]:
        """(path, bytes, mtime) of every entry on disk, oldest first."""
        out = []
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    if not e.name.endswith(_SUFFIX):
                        continue
                    try:
                        st = e.stat()
                    except OSError:  # deleted by a concurrent evictor
                        continue
                    out.append((Path(e.path), st.st_size, st.st_mtime))
        except OSError:
            return []
        out.sort(key=lambda t: t[2])
        return out

    def size(self) -> int:
        """Total bytes of the entries on disk."""
        return sum(n for _, n, _ in self.entries())

    def evict(self) -> int:
        """Delete least-recently-used entries until the namespace fits its cap; returns how many."""
        entries = self.entries()
        total = sum(n for _, n, _ in entries)
        cap, removed = self.max_bytes, 0
        for path, n, _ in entries:
            if total <= cap:
                break
            self._remove(path)
            with self._lock:
                self._memory.pop((str(path.parent), path.name[:-len(_SUFFIX)]), None)
            total -= n
            removed += 1
        return removed

    # ------------------------------------------------------------------ helpers
    def _remember(self, mkey, payload: bytes) -> None:
        with self._lock:
            self._memory[mkey] = payload
            self._memory.move_to_end(mkey)
            while len(self._memory) > self._memory_entries:
                self._memory.popitem(last=False)

    @staticmethod
    def _remove(path: Path) -> None:
        try:
            path.unlink()
        except OSError:  # already gone (a concurrent evictor), or not ours to delete
            pass


_fingerprints: dict[str, str] = {}


def package_fingerprint(path: str | Path) -> str:
    """A hash of the Python sources under the package directory `path` (names, sizes and
    modification times; computed once per process): part of a compile-cache key, so that
    editing tilecore or a backend (an editable install, a development tree) never serves
    a kernel built by the old code."""
    key = str(path)
    fp = _fingerprints.get(key)
    if fp is None:
        rows: list[str] = []
        _scan(key, "", rows)
        rows.sort()
        fp = _fingerprints[key] = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:32]
    return fp


def _scan(directory: str, prefix: str, rows: list[str]) -> None:
    """Append `relpath size mtime_ns` of every .py file under `directory` (no __pycache__)."""
    try:
        it = os.scandir(directory)
    except OSError:
        return
    with it:
        for e in it:
            if e.name.endswith(".py"):
                try:
                    st = e.stat()
                except OSError:
                    continue
                rows.append(f"{prefix}{e.name} {st.st_size} {st.st_mtime_ns}")
            elif e.name != "__pycache__" and not e.name.startswith(".") and e.is_dir():
                _scan(e.path, f"{prefix}{e.name}/", rows)
