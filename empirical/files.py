"""File plumbing shared by every package: atomic writes, sha256 checksums and the user cache directory.

Atomic writes are the one helper every cache, saved probe and figure goes through.

``with atomic_path(target) as tmp:`` yields a temporary path in the target's directory; when the block
succeeds the file is given the permissions a plain ``open(target, "w")`` would have (``0o666`` minus
the umask) and moved over ``target`` with ``os.replace`` (atomic on POSIX and Windows); when it raises,
the temporary file is removed and ``target`` is left untouched.  Readers therefore see either the
old file or the complete new one, never a half-written file.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "atomic_write_bytes", "atomic_write_text", "write_json", "write_csv", "save_figure",
           "sha256_file", "write_checksum", "verify_checksum", "ChecksumError", "cache_root"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(target, suffix: str = ".tmp") -> Iterator[Path]:
    """Temporary path next to ``target`` that replaces it when the block succeeds.

    ``suffix`` is the temporary name's ending (e.g. ``".npy"`` for ``np.save``, which appends it otherwise).
    Parent directories are created.  The temporary name is unique (``mkstemp``), so two writers of the
    same target never share a temporary file.

    Parameters
    ----------
    target : str or path-like
        The file to write.
    suffix : str
        Ending of the temporary name.

    Yields
    ------
    pathlib.Path
        The temporary path to write to.

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "table.csv"
    >>> with atomic_path(target) as tmp:
    ...     _ = tmp.write_text("a,b")
    >>> target.read_text()
    'a,b'
    """
    target = Path(target)
    if target.is_dir():
        raise IsADirectoryError(f"cannot write {str(target)!r}: a directory of that name exists")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_bytes(target, data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically.

    Parameters
    ----------
    target : str or path-like
    data : bytes

    Returns
    -------
    pathlib.Path
        ``target``.

    Examples
    --------
    >>> import tempfile
    >>> atomic_write_bytes(Path(tempfile.mkdtemp()) / "a.bin", b"ok").read_bytes()
    b'ok'
    """
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
    return Path(target)


def atomic_write_text(target, text: str) -> Path:
    """Write ``text`` to ``target`` atomically.

    Parameters
    ----------
    target : str or path-like
    text : str

    Returns
    -------
    pathlib.Path
        ``target``.

    Examples
    --------
    >>> import tempfile
    >>> atomic_write_text(Path(tempfile.mkdtemp()) / "a.txt", "ok").read_text()
    'ok'
    """
    with atomic_path(target) as tmp:
        tmp.write_text(text)
    return Path(target)


def _json_default(value):
    return value.item() if hasattr(value, "item") else str(value)


def write_json(target, obj, *, indent: int = 1) -> Path:
    """Write ``obj`` as JSON atomically (numpy scalars become numbers, other objects strings).

    Parameters
    ----------
    target : str or path-like
    obj : JSON-serializable object (numpy scalars allowed)
    indent : int

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import tempfile, numpy as np
    >>> json.loads(write_json(Path(tempfile.mkdtemp()) / "a.json", {"x": np.float64(0.5)}).read_text())
    {'x': 0.5}
    """
    return atomic_write_text(target, json.dumps(obj, indent=indent, default=_json_default))


def write_csv(target, frame) -> Path:
    """Write a pandas DataFrame as CSV (no index) atomically.

    Parameters
    ----------
    target : str or path-like
    frame : pandas.DataFrame

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> write_csv(Path(tempfile.mkdtemp()) / "a.csv", pd.DataFrame({"a": [1]})).read_text().split()
    ['a', '1']
    """
    with atomic_path(target, suffix=".csv") as tmp:
        frame.to_csv(tmp, index=False)
    return Path(target)


def save_figure(fig, target, *, dpi: int = 130) -> Path:
    """Save a matplotlib figure as PNG atomically, then close it.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
    target : str or path-like
    dpi : int

    Returns
    -------
    pathlib.Path
    """
    import matplotlib.pyplot as plt  # plotting is optional for the library

    with atomic_path(target, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
    plt.close(fig)
    return Path(target)


def sha256_file(path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file's bytes, read in ``chunk``-byte blocks.

    Parameters
    ----------
    path : str or path-like
    chunk : int
        Bytes read at a time.

    Returns
    -------
    str

    Examples
    --------
    >>> import tempfile
    >>> sha256_file(atomic_write_bytes(Path(tempfile.mkdtemp()) / "e", b""))[:16]
    'e3b0c44298fc1c14'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


class ChecksumError(ValueError):
    """A file does not match the checksum recorded when it was written (or has none): damaged or edited."""


def _checksum_path(target: Path) -> Path:
    return target.parent / f".{target.name}.sha256"


def write_checksum(target) -> Path:
    """Record the sha256 of ``target`` (just written) in the hidden sidecar ``.<name>.sha256`` next to it.

    A file written this way and read back through :func:`verify_checksum` is never trusted after a
    change: results a program resumes from (``paper_figures`` tables, raw evaluations) use the pair.

    Parameters
    ----------
    target : str or path-like

    Returns
    -------
    pathlib.Path
        ``target``.

    Examples
    --------
    >>> import tempfile
    >>> path = write_checksum(atomic_write_text(Path(tempfile.mkdtemp()) / "t.csv", "a,b"))
    >>> verify_checksum(path)
    True
    >>> _ = path.write_text("a,c")
    >>> verify_checksum(path)
    Traceback (most recent call last):
    ...
    empirical.files.ChecksumError: ... does not match the checksum recorded when it was written (damaged or edited)
    """
    target = Path(target)
    atomic_write_text(_checksum_path(target), sha256_file(target) + "\n")
    return target


def verify_checksum(target) -> bool:
    """True if ``target`` exists and matches its recorded checksum, False if it does not exist.

    Raises
    ------
    ChecksumError
        Naming the file when its checksum is missing or differs.
    """
    target = Path(target)
    if not target.exists():
        return False
    sidecar = _checksum_path(target)
    try:
        recorded = sidecar.read_text().strip()
    except (OSError, UnicodeDecodeError):
        raise ChecksumError(f"{str(target)!r} has no recorded checksum ({sidecar.name} is missing or unreadable); "
                            "it may be incomplete") from None
    if recorded != sha256_file(target):
        raise ChecksumError(f"{str(target)!r} does not match the checksum recorded when it was written "
                            "(damaged or edited)")
    return True


def cache_root(cache_dir=None) -> Path:
    """The user cache directory: argument > ``$RAPTOR_CACHE`` > ``~/.cache/raptor``.

    Parameters
    ----------
    cache_dir : str or path-like, optional

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> cache_root("/tmp/my-cache")
    PosixPath('/tmp/my-cache')
    """
    if cache_dir is not None:
        if not str(cache_dir).strip():  # Path("") is the working directory
            raise ValueError(f"cache_dir must be a non-empty path, got {str(cache_dir)!r}")
        return Path(cache_dir).expanduser()
    env = os.environ.get("RAPTOR_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "raptor"
