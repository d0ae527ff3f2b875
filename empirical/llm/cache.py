"""On-disk store of extracted hidden states: one memory-mappable ``.npy`` per (model, prompts) key.

Layout of an entry ``<root>/<label>-<key[:20]>``:
``.npy`` the finished float32 array (L+1, n_prompts, hidden) with layers 0..L (layer 0 = embeddings);
``.json`` its metadata (the full key material, shape, sha256 of the ``.npy``);
``.partial.npy`` + ``.done.npy`` while an extraction is under way (resumable: ``done[i]`` is True
once row i of every layer has been written and flushed); ``.lock`` serializes concurrent
extractors of the same entry (``fcntl.flock``). Finished files are written under temporary
names and published with ``os.replace``; metadata and checksums are validated on load.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np

from ..files import atomic_path, atomic_write_text, cache_root, sha256_file

FORMAT = 1


def key_of(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()



def _atomic_save_npy(path: Path, arr):
    with atomic_path(path, suffix=".npy") as tmp:
        np.save(tmp, arr)


class CacheEntry:
    """One cache entry; create with :meth:`ExtractionCache.entry`."""

    def __init__(self, root: Path, label: str, meta: dict, shape: tuple):
        self.meta = dict(meta, format=FORMAT)
        self.key = key_of(self.meta)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label or "prompts")[:60]
        base = root / f"{safe}-{self.key[:20]}"
        self.path = base.with_suffix(".npy")
        self.meta_path = base.with_suffix(".json")
        self.partial_path = Path(str(base) + ".partial.npy")
        self.done_path = Path(str(base) + ".done.npy")
        self.lock_path = Path(str(base) + ".lock")
        self.shape = tuple(int(s) for s in shape)

    # -- finished entries -------------------------------------------------------------------
    def load(self, verify: bool = True):
        """The finished array as a read-only memmap, or None if absent; ValueError if corrupt."""
        if not (self.path.is_file() and self.meta_path.is_file()):
            return None
        info = json.loads(self.meta_path.read_text())
        if info.get("key") != self.key or info.get("meta") != self.meta:
            raise ValueError(f"cache metadata {self.meta_path} does not match its key; delete the entry")
        arr = np.load(self.path, mmap_mode="r")
        if arr.shape != self.shape or arr.dtype != np.float32:
            raise ValueError(f"cache file {self.path} has shape {arr.shape}/{arr.dtype}, expected {self.shape}/float32")
        if verify and sha256_file(self.path) != info.get("sha256"):
            raise ValueError(f"cache file {self.path} fails its checksum; delete it and re-run")
        return arr

    @contextlib.contextmanager
    def lock(self):
        """Exclusive inter-process lock of this entry (a second extractor waits, then finds it done)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            yield

    # -- in-progress entries ----------------------------------------------------------------
    def open_partial(self):
        """(memmap opened r+, done mask) resuming a previous partial run when it matches."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.partial_path.is_file() and self.done_path.is_file():
            try:
                mm = np.load(self.partial_path, mmap_mode="r+")
                done = np.load(self.done_path)
                if mm.shape == self.shape and mm.dtype == np.float32 and done.shape == (self.shape[1],):
                    return mm, done.astype(bool)
            except (ValueError, OSError):
                pass
        mm = np.lib.format.open_memmap(self.partial_path, mode="w+", dtype=np.float32, shape=self.shape)
        done = np.zeros(self.shape[1], dtype=bool)
        _atomic_save_npy(self.done_path, done)
        return mm, done

    def checkpoint(self, mm, done):
        mm.flush()
        _atomic_save_npy(self.done_path, done)

    def finish(self, mm):
        mm.flush()
        del mm
        digest = sha256_file(self.partial_path)
        os.replace(self.partial_path, self.path)
        info = {"key": self.key, "meta": self.meta, "shape": list(self.shape), "dtype": "float32", "sha256": digest}
        atomic_write_text(self.meta_path, json.dumps(info, indent=1))
        try:
            self.done_path.unlink()
        except FileNotFoundError:
            pass


class ExtractionCache:
    """A directory of hidden-state entries (default ``$RAPTOR_CACHE/hidden``)."""

    def __init__(self, root=None, verify: bool = True):
        if root is None:
            root = cache_root() / "hidden"
        self.root = Path(root).expanduser()
        self.verify = verify

    def entry(self, label: str, meta: dict, shape: tuple) -> CacheEntry:
        return CacheEntry(self.root, label, meta, shape)

    def __repr__(self):
        return f"ExtractionCache({str(self.root)!r})"
