"""On-disk store of extracted hidden states: one memory-mappable ``.npy`` per (model, prompts) key.

Layout of an entry ``<root>/<label>-<key[:20]>`` (the label made file-safe; the whole key when another entry
already holds the short name, so two keys never share files):
``.npy`` the finished float32 array (L+1, n_prompts, hidden) with layers 0..L (layer 0 = embeddings), or float16
on request (``ExtractionCache(storage="float16")``: half the disk and memory; the storage is part of the key);
``.json`` its metadata (the full key material, shape, sha256 of the ``.npy``);
``.partial.npy`` + ``.rows.npz`` while an extraction is under way (resumable: ``done[i]`` is True
once row i of every layer has been written and flushed, and ``digests[i]`` is the sha256 of that
row's bytes as computed, so a damaged partial row is detected and recomputed, never trusted);
``.lock`` serializes concurrent extractors of the same entry (:func:`empirical.common.files.exclusive_lock`, removed
on release). The partial file is reserved on disk before it is memory-mapped (free space checked, then
``posix_fallocate``), so a full disk is an error naming the cache directory, never a SIGBUS; states the storage
cannot hold (NaN, inf, beyond float16's range, mostly below its smallest normal) are refused naming the layer
before they are written (:func:`check_storable`). Before a partial
file is published every row is checked against its digest; the finished ``.npy`` is written under
a temporary name and published with ``os.replace``; metadata and checksums are validated on load.
No write follows a symbolic link it did not create: the partial file is created exclusively under a fresh name
and renamed into place (a link planted at ``.partial.npy`` is replaced, its target untouched) and reopened, like
the lock, with ``O_NOFOLLOW``.
A damaged finished entry raises :class:`CacheCorruptionError` naming the files to delete.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tokenize
import warnings
import zipfile
from pathlib import Path

import numpy as np

from empirical.common.checks import check_choice

from ..common.files import (
    atomic_file,
    atomic_path,
    atomic_write_text,
    cache_root,
    check_path,
    exclusive_lock,
    naming_write_errors,
    open_for_update,
    read_json,
    reserve_file_space,
    sha256_file,
)

#: The API (entries, partial rows and digests are the cache's internals)
__all__ = ["ExtractionCache", "CacheCorruptionError", "STORAGES", "FORMAT"]

FORMAT = 1
DIGEST_BYTES = 32
#: the dtypes an entry may be stored in (:class:`ExtractionCache`)
STORAGES = ("float32", "float16")
# What np.load raises for a damaged file; on Python >= 3.12 a null byte in an .npy header reaches the
# tokenizer numpy parses the header with, which raises tokenize.TokenError (not a ValueError).
_UNREADABLE = (ValueError, OSError, EOFError, tokenize.TokenError)


class CacheCorruptionError(ValueError):
    """A cache file is damaged or does not match its metadata (the message names the files)."""


def key_of(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()



def row_digest(rows: np.ndarray) -> bytes:
    """sha256 of one prompt's hidden states (all layers) as float32 C-order bytes."""
    return hashlib.sha256(np.ascontiguousarray(rows, dtype=np.float32).tobytes()).digest()


#: Most of a layer's nonzero hidden states (in one batch) that float16 storage may flush to zero or to a subnormal
#: number (|h| < 2**-14 = 6.1e-5, where float16 keeps fewer than 11 significant bits); above it the storage is
#: refused (:func:`check_storable`).  A layer of N(0, s^2) states passes for s > 5e-3 (real layers: s ~ 1, a
#: fraction ~ 5e-5); a layer at the 1e-9 scale (a tiny random model) loses every value and fails.
FLOAT16_UNDERFLOW_MAX = 0.01
#: ... and at least this many of them (a narrow layer in a one-prompt batch: one small value of 32 is 3 %, and an
#: N(0, 1) layer has one with probability 1.6e-3; eight such values by chance have probability ~1e-27)
FLOAT16_UNDERFLOW_MIN_COUNT = 8


def _layer_names(layers, n: int) -> list:
    return list(range(n)) if layers is None else [int(layer) for layer in layers]


def check_hidden_finite(buf, layers=None) -> None:
    """``ValueError`` naming the first layer whose states (``buf``: n_layers x rows x p) hold NaN, or, separately,
    an infinity (the model's own output: never stored, never passed on)."""
    buf = np.asarray(buf)
    bad = ~np.isfinite(buf)
    if not bad.any():
        return
    names = _layer_names(layers, buf.shape[0])
    for k in range(buf.shape[0]):
        if not bad[k].any():
            continue
        nan = int(np.isnan(buf[k]).sum())
        inf = int(np.isinf(buf[k]).sum())
        what = f"NaN in {nan} of {buf[k].size} values" if nan else f"infinite (+-inf) in {inf} of {buf[k].size} values"
        also = f" (and +-inf in {inf})" if nan and inf else ""
        raise ValueError(f"hidden states of layer {names[k]} are {what}{also}: the model computed non-finite states "
                         "(try dtype='float32' for the model, or another layer); nothing of this batch was stored")


def check_storable(buf, dtype, layers=None) -> np.ndarray:
    """``buf`` (n_layers x rows x p) rounded to the storage ``dtype``, if the storage holds it; else a ``ValueError``
    naming the layer: NaN or infinite states (:func:`check_hidden_finite`), a state beyond the storage's range
    (float16: 65504), or, for float16, more than :data:`FLOAT16_UNDERFLOW_MAX` of a layer's nonzero states (and at
    least :data:`FLOAT16_UNDERFLOW_MIN_COUNT` of them) flushed to zero or to a subnormal number (the fraction
    named).  Every message for float16 names ``--cache-dtype`` and suggests float32.  Nothing is rounded silently
    into a different array."""
    buf = np.asarray(buf)
    check_hidden_finite(buf, layers)
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore", under="ignore"):  # both are refused just below, with their reason
        stored = buf.astype(dtype, copy=False)
    if dtype == buf.dtype:
        return stored
    names = _layer_names(layers, buf.shape[0])
    advice = ("store them as float32 (the default storage; --cache-dtype float32, ExtractionCache(storage="
              "'float32'))")
    for k in range(buf.shape[0]):
        if not np.all(np.isfinite(stored[k])):
            raise ValueError(f"hidden states of layer {names[k]} are beyond {dtype}'s range (--cache-dtype {dtype}: "
                             f"largest |h| = {float(np.abs(buf[k]).max()):.4g}, largest {dtype} "
                             f"{float(np.finfo(dtype).max):.6g}); {advice}")
    if dtype.kind == "f" and np.finfo(dtype).tiny > np.finfo(np.float32).tiny:
        tiny = float(np.finfo(dtype).tiny)
        for k in range(buf.shape[0]):
            magnitude = np.abs(buf[k])
            nonzero = int(np.count_nonzero(magnitude))
            lost = int(np.count_nonzero((magnitude > 0) & (magnitude < tiny)))
            if nonzero and lost / nonzero > FLOAT16_UNDERFLOW_MAX and lost >= FLOAT16_UNDERFLOW_MIN_COUNT:
                flushed = int(np.count_nonzero((magnitude > 0) & (stored[k] == 0)))
                raise ValueError(
                    f"hidden states of layer {names[k]} are too small for {dtype} storage (--cache-dtype {dtype}): "
                    f"{lost / nonzero:.1%} of its nonzero values ({lost} of {nonzero}, largest |h| = "
                    f"{float(magnitude.max()):.3g}) lie below {dtype}'s smallest normal number {tiny:.3g}, "
                    f"{flushed} of them flushed to zero (at most {FLOAT16_UNDERFLOW_MAX:.0%} is accepted); {advice}")
    return stored


class PartialRows:
    """Progress of an extraction under way: which prompt rows are written, and the digest of each."""

    def __init__(self, n: int):
        self.done = np.zeros(n, dtype=bool)
        self.digests = np.zeros((n, DIGEST_BYTES), dtype=np.uint8)

    def record(self, mm, idx, buf, layers=None):
        """Write ``buf`` (n_layers, len(idx), p) into rows ``idx`` of ``mm`` (rounded to its dtype) and remember
        their digests (of the stored values); ``layers`` names buf's layers in errors (default 0, 1, ...).
        States the storage cannot hold are refused before anything is written (:func:`check_storable`)."""
        stored = check_storable(buf, mm.dtype, layers)
        mm[:, idx, :] = stored
        for k, i in enumerate(np.atleast_1d(idx)):
            self.digests[i] = np.frombuffer(row_digest(stored[:, k, :]), dtype=np.uint8)
            self.done[i] = True

    def damaged(self, mm) -> np.ndarray:
        """Indices of rows marked done whose bytes in ``mm`` no longer match their digest."""
        return np.array([i for i in np.flatnonzero(self.done)
                         if row_digest(mm[:, i, :]) != self.digests[i].tobytes()], dtype=int)


def _key_of_entry(meta_path: Path):
    """The key recorded in a finished entry's metadata, or None when there is none (absent or unreadable:
    then the file is this entry's, damaged, and :meth:`CacheEntry.load` says so)."""
    try:
        info = read_json(meta_path)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    key = info.get("key") if isinstance(info, dict) else None
    return key if isinstance(key, str) and re.fullmatch(r"[0-9a-f]{64}", key) else None


class CacheEntry:
    """One cache entry; create with :meth:`ExtractionCache.entry`."""

    def __init__(self, root: Path, label: str, meta: dict, shape: tuple, dtype=np.float32):
        self.dtype = np.dtype(dtype)
        # float32 entries keep the key they had before other storages existed
        self.meta = dict(meta, format=FORMAT, **({} if self.dtype == np.float32 else {"storage": self.dtype.name}))
        self.key = key_of(self.meta)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label or "prompts")[:60]
        base = root / f"{safe}-{self.key[:20]}"
        if _key_of_entry(Path(f"{base}.json")) not in (None, self.key):  # the short name is another entry's
            base = root / f"{safe}-{self.key}"
        # suffixes are appended, never substituted: a label with a dot ('reviews.v2') keeps its whole name
        self.path = Path(f"{base}.npy")
        self.meta_path = Path(f"{base}.json")
        self.partial_path = Path(str(base) + ".partial.npy")
        self.rows_path = Path(str(base) + ".rows.npz")
        self.lock_path = Path(str(base) + ".lock")
        self.shape = tuple(int(s) for s in shape)

    # -- finished entries -------------------------------------------------------------------
    def _corrupt(self, problem: str) -> CacheCorruptionError:
        return CacheCorruptionError(f"hidden-state cache entry {str(self.path)!r} is damaged: {problem}. Delete "
                                    f"{self.path.name} and {self.meta_path.name} in {str(self.path.parent)!r} "
                                    "(the next run recomputes them)")

    def load(self, verify: bool = True):
        """The finished array as a read-only memmap, or None if absent; :class:`CacheCorruptionError` if damaged."""
        if not (self.path.is_file() and self.meta_path.is_file()):
            return None
        try:
            info = read_json(self.meta_path)
        except ValueError as exc:
            raise self._corrupt(f"its metadata {self.meta_path.name} cannot be read ({exc})") from None
        if not isinstance(info, dict) or info.get("key") != self.key or info.get("meta") != self.meta:
            raise self._corrupt(f"its metadata {self.meta_path.name} does not match its key")
        try:
            arr = np.load(self.path, mmap_mode="r", allow_pickle=False)
        except _UNREADABLE as exc:
            raise self._corrupt(f"the array file cannot be read ({exc})") from None
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise self._corrupt(f"it holds {arr.shape}/{arr.dtype}, expected {self.shape}/{self.dtype}")
        if verify and sha256_file(self.path) != info.get("sha256"):
            raise self._corrupt("the array file fails its sha256 checksum")
        return arr

    def lock(self):
        """Exclusive inter-process lock of this entry (a second extractor waits, then finds it done): the project's
        one lock, :func:`empirical.common.files.exclusive_lock` (never through a link planted at the lock's name;
        the ``.lock`` file is removed on release, also when the extraction fails)."""
        return exclusive_lock(self.lock_path, what=f"hidden-state cache entry {str(self.path)!r}")

    # -- in-progress entries ----------------------------------------------------------------
    def _load_rows(self) -> PartialRows | None:
        try:
            with np.load(self.rows_path, allow_pickle=False) as saved:
                done, digests = saved["done"], saved["digests"]
        except (*_UNREADABLE, KeyError, zipfile.BadZipFile):
            return None
        if done.shape != (self.shape[1],) or digests.shape != (self.shape[1], DIGEST_BYTES):
            return None
        rows = PartialRows(self.shape[1])
        rows.done[:] = done.astype(bool)
        rows.digests[:] = digests
        return rows

    def open_partial(self):
        """(memmap opened r+, :class:`PartialRows`) resuming a previous partial run when it matches.

        Rows of the previous run that fail their digest are marked undone (and recomputed), with a warning."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(self.partial_path) and self.rows_path.is_file():
            rows = self._load_rows()
            mm = self._reopen_partial()
            if rows is not None and mm is not None:
                bad = rows.damaged(mm)
                if bad.size:
                    warnings.warn(f"{bad.size} row(s) of the partial cache file {str(self.partial_path)!r} fail "
                                  "their checksum; recomputing them", RuntimeWarning, stacklevel=4)
                    rows.done[bad] = False
                return mm, rows
            warnings.warn(f"partial cache files {self.partial_path.name} / {self.rows_path.name} are not this "
                          "cache's (a symbolic link, never written through) or damaged; starting the extraction of "
                          "this entry over", RuntimeWarning, stacklevel=4)
        # created exclusively under a fresh name and renamed into place: a file or a link already at the partial
        # file's name is replaced, never opened (a planted link's target stays untouched)
        header = {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False, "shape": self.shape}
        with naming_write_errors(self.partial_path), atomic_file(self.partial_path, suffix=".npy") as fh:
            try:
                np.lib.format.write_array_header_1_0(fh, header)
            except ValueError:  # a header over 64 KiB
                np.lib.format.write_array_header_2_0(fh, header)
            offset = fh.tell()
            fh.flush()
            # every byte reserved before the memory map is written: a full disk is this error, never a SIGBUS
            reserve_file_space(fh.fileno(), offset + self._nbytes(), self.partial_path, self._space_hint())
            mm = np.memmap(fh, dtype=self.dtype, mode="r+", shape=self.shape, offset=offset)
        rows = PartialRows(self.shape[1])
        self.checkpoint(mm, rows)
        return mm, rows

    def _reopen_partial(self):
        """The partial file as a memmap opened r+, or None when it is not this entry's: a symbolic link (never
        written through), not a ``.npy`` of the entry's shape and dtype, or shorter than its array."""
        try:
            fd = open_for_update(self.partial_path)
        except (OSError, ValueError):
            return None
        with os.fdopen(fd, "r+b") as fh:
            try:
                version = np.lib.format.read_magic(fh)
                read = {(1, 0): np.lib.format.read_array_header_1_0,
                        (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                if read is None:
                    return None
                shape, fortran, dtype = read(fh)
            except _UNREADABLE:
                return None
            offset = fh.tell()
            if (tuple(shape) != self.shape or fortran or dtype != self.dtype
                    or os.fstat(fh.fileno()).st_size < offset + self._nbytes()):
                return None
            # a partial file of an older run may be sparse: reserve its holes before writing through the map
            reserve_file_space(fh.fileno(), offset + self._nbytes(), self.partial_path, self._space_hint())
            return np.memmap(fh, dtype=self.dtype, mode="r+", shape=self.shape, offset=offset)

    def _space_hint(self) -> str:
        return ("free some space, or choose another hidden-state cache directory (--cache-dir, RAPTOR_CACHE); the rows "
                "already extracted stay, and a re-run resumes")

    def _nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def checkpoint(self, mm, rows: PartialRows):
        """Flush the rows written so far, then record them (atomically) as done."""
        with naming_write_errors(self.partial_path):
            mm.flush()
        with atomic_path(self.rows_path, suffix=".npz") as tmp:
            np.savez(tmp, done=rows.done, digests=rows.digests)

    def discard_partial(self):
        """Remove the partial file and its row record (an extraction refused before it stored any row)."""
        self.partial_path.unlink(missing_ok=True)
        self.rows_path.unlink(missing_ok=True)

    def finish(self, mm, rows: PartialRows):
        """Verify every row against its digest, then publish the partial file as the finished entry."""
        with naming_write_errors(self.partial_path):
            mm.flush()
        if not rows.done.all():
            raise RuntimeError(f"{int((~rows.done).sum())} rows of {self.partial_path} are not computed")
        bad = rows.damaged(mm)
        if bad.size:
            rows.done[bad] = False
            self.checkpoint(mm, rows)
            raise CacheCorruptionError(f"{bad.size} row(s) of {str(self.partial_path)!r} changed on disk after they "
                                       "were written (disk fault?); they are marked undone: run again to recompute "
                                       "them")
        del mm
        digest = sha256_file(self.partial_path)
        # one unit: the metadata (with the array's sum) first, then the array.  Stopped between the two, the entry
        # is incomplete (no array) while the partial file and its row record remain, so the next run resumes with
        # every row done and only publishes; the other order left an array without metadata, and the next run
        # recomputed every row
        info = {"key": self.key, "meta": self.meta, "shape": list(self.shape), "dtype": self.dtype.name,
                "sha256": digest}
        atomic_write_text(self.meta_path, json.dumps(info, indent=1))
        with naming_write_errors(self.path):
            os.replace(self.partial_path, self.path)
        self.rows_path.unlink(missing_ok=True)


class ExtractionCache:
    """A directory of hidden-state entries (default ``$RAPTOR_CACHE/hidden``).

    Parameters
    ----------
    root : str or path-like, optional
        The directory (``~`` expanded; created when the first entry is written); default
        ``cache_root() / "hidden"`` (:func:`empirical.common.files.cache_root`).  An empty path, or an existing
        file, is a ``ValueError``.
    verify : bool, default=True
        Check a finished entry's sha256 every time extraction loads it (a full read of the file); False trusts
        the shape, dtype and metadata checks alone.
    storage : {"float32", "float16"}, default="float32"
        The dtype entries are stored in: float16 halves disk and memory (an 80-layer, p = 8192 model over 6,000
        prompts: 7.9 GB instead of 15.7 GB) at a measured accuracy cost (docs/llm.md, "Cache storage"); a state
        beyond float16's range (65504) is refused, naming the storage, and so is a layer whose nonzero states it would
        mostly flush to zero or subnormal numbers (:data:`FLOAT16_UNDERFLOW_MAX`).  Part of each entry's key.

    Attributes
    ----------
    root : pathlib.Path
        The directory.
    verify : bool
        As given.
    storage : numpy.dtype
        As given.

    Examples
    --------
    >>> import tempfile
    >>> ExtractionCache(tempfile.mkdtemp()).root.is_dir()
    True
    """

    def __init__(self, root=None, verify: bool = True, storage: str = "float32"):
        if root is None:
            root = cache_root() / "hidden"
        self.root = check_path(root, "root (the cache directory)")
        if self.root.exists() and not self.root.is_dir():
            raise ValueError(f"root (the cache directory) must be a directory, got {str(self.root)!r}")
        self.verify = verify
        self.storage = np.dtype(check_choice(storage, "storage", STORAGES))

    def entry(self, label: str, meta: dict, shape: tuple) -> CacheEntry:
        return CacheEntry(self.root, label, meta, shape, self.storage)

    def __repr__(self):
        return f"ExtractionCache({str(self.root)!r})"
