"""The on-disk cache of compiled kernels: keys, and entries that are checked before they are used.

A key is the sha256 of everything that determines a compiled kernel (`cache_key`): the kernel's
frontend IR text (the traced Python source: closure values, arguments and constants are in it),
the options (chip, target), the compiler's own fingerprint (`compiler_fingerprint`: version and
every source file's path, size and modification time) and the backend's tag for the host (LLVM
target triple, CPU name and features). It is computed before any pass runs.

An entry (`<dir>/<kind>/<key>.bin`) is

    MAGIC | sha256(payload) | len(payload) u64 | payload
    payload = len(meta) u64 | meta (JSON, holding "key") | len(blob_0) u64 | blob_0 | ...

and `read_entry` returns it only if it is a regular file (opened without following a symlink and
without blocking: a FIFO, a device or a directory is never read), of a plausible size, whole
(length and checksum) and recording the key it is looked up under (an entry copied or renamed
to another key's name is not that key's entry). Anything else is ignored (and later replaced).
An entry may hold IR (the frontend kernel a traced-call entry records, the numpy target's lowered
kernel): `dump_ir`/`load_ir` pickle it, and `load_ir` builds nothing but IR nodes (classes of
`tilelang_mini.ir.nodes`) and builtin containers, so a spoiled entry cannot name other code.
Entries are written atomically (temporary file + rename); a cache directory that is missing or
not writable only means nothing is stored.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import stat
import struct
import threading
from pathlib import Path

from ..gc_pause import collector_paused
from . import config

MAGIC = b"TLMCACH2"
MAX_ENTRY_BYTES = 1 << 30
_HEAD = len(MAGIC) + 32 + 8
STATS = {"hits": 0, "misses": 0, "stores": 0, "rejected": 0}

_FINGERPRINT: dict = {}


def compiler_fingerprint(*roots: Path) -> str:
    """sha256 of the package version and of (path, size, mtime) of every source file under
    `roots` (this package and the backend): a changed compiler never reuses old entries."""
    key = tuple(str(r) for r in roots)
    cached = _FINGERPRINT.get(key)
    if cached is not None:
        return cached
    from .. import __version__
    h = hashlib.sha256(__version__.encode())
    for root in roots:
        _fingerprint_dir(h, str(root), "")
    _FINGERPRINT[key] = h.hexdigest()
    return _FINGERPRINT[key]


def _fingerprint_dir(h, path: str, rel: str) -> None:
    try:
        with os.scandir(path) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        return
    for e in entries:
        if e.name.endswith((".py", ".lark", ".json")):
            try:
                st = e.stat(follow_symlinks=True)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                h.update(f"{rel}{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        elif e.name != "__pycache__" and e.is_dir(follow_symlinks=True):
            _fingerprint_dir(h, e.path, f"{rel}{e.name}/")


def cache_key(**parts: str) -> str:
    h = hashlib.sha256()
    for name in sorted(parts):
        value = parts[name].encode()
        h.update(f"{name}\0{len(value)}\0".encode())
        h.update(value)
    return h.hexdigest()


def entry_path(kind: str, key: str) -> Path | None:
    """Where the entry of `key` lives, or None when the cache is turned off."""
    if not config.cache_enabled():
        return None
    return config.cache_dir() / kind / f"{key}.bin"


def read_entry(path: Path, key: str) -> tuple[dict, list[bytes]] | None:
    """(meta, blobs) of the well-formed entry of `key` at `path`, else None (never blocks on
    what is not a regular file, never reads more than the file's own size)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) \
        | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # missing (the usual miss), a symlink, unreadable
        STATS["misses"] += 1
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _HEAD <= st.st_size <= MAX_ENTRY_BYTES:
            return _reject()
        data = _read_exactly(fd, st.st_size)
    except OSError:
        return _reject()
    finally:
        os.close(fd)
    entry = _decode(data, key) if data is not None else None
    if entry is None:
        return _reject()
    STATS["hits"] += 1
    return entry


def _reject():
    STATS["rejected"] += 1
    return None


def _read_exactly(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 24))
        if not chunk:
            return None  # shorter than fstat said: being replaced
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _decode(data: bytes, key: str) -> tuple[dict, list[bytes]] | None:
    try:
        if data[:len(MAGIC)] != MAGIC:
            return None
        digest = data[len(MAGIC):len(MAGIC) + 32]
        (n,) = struct.unpack_from("<Q", data, len(MAGIC) + 32)
        payload = data[_HEAD:]
        if len(payload) != n or hashlib.sha256(payload).digest() != digest:
            return None
        parts, pos = [], 0
        while pos < n:
            (size,) = struct.unpack_from("<Q", payload, pos)
            pos += 8
            if size > n - pos:
                return None
            parts.append(payload[pos:pos + size])
            pos += size
        if not parts:
            return None
        meta = json.loads(parts[0].decode())
        if not isinstance(meta, dict) or meta.get("key") != key:
            return None
        return meta, parts[1:]
    except (ValueError, struct.error, UnicodeDecodeError, RecursionError):
        return None


def write_entry(path: Path | None, key: str, meta: dict, blobs: list[bytes]) -> None:
    """Store an entry atomically; a cache that cannot be written is not an error."""
    if path is None:
        return
    parts = [json.dumps({**meta, "key": key}).encode(), *blobs]
    payload = b"".join(struct.pack("<Q", len(p)) + p for p in parts)
    data = MAGIC + hashlib.sha256(payload).digest() + struct.pack("<Q", len(payload)) + payload
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}."
                         f"{os.urandom(4).hex()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
        STATS["stores"] += 1
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


# ---------------------------------------------------------------------------------- IR blobs

_IR_MODULE = "tilelang_mini.ir.nodes"
_BUILTINS = frozenset({"frozenset", "set", "complex", "slice"})


class _IRUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == _IR_MODULE and not name.startswith("_"):
            from ..ir import nodes
            cls = getattr(nodes, name, None)
            if isinstance(cls, type):
                return cls
        elif module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"not an IR class: {module}.{name}")


def dump_ir(node) -> bytes:
    """An IR node (a Kernel) as an entry's blob."""
    return pickle.dumps(node, protocol=5)


def load_ir(blob: bytes):
    """The IR node of `dump_ir`, or None when the blob is not one (IR classes only).

    The cyclic garbage collector is paused while unpickling: a large kernel's IR is tens of
    thousands of new objects, none of them garbage, and allocating them set off full
    collections over the whole heap (a 2 ms cache hit took 60 ms in a process that held the
    flash_mla example's estimates)."""
    try:
        with collector_paused():
            return _IRUnpickler(io.BytesIO(blob)).load()
    except Exception:  # noqa: BLE001 - a spoiled blob is a miss, never a crash
        return None
