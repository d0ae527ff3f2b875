"""File plumbing shared by every package: atomic writes, sha256 checksums and the user cache directory.

Atomic writes are the one helper every cache, saved probe and figure goes through.

``with atomic_path(target) as tmp:`` yields a temporary path in the target's directory; when the block
succeeds the file is given the permissions a plain ``open(target, "w")`` would have (``0o666`` minus
the umask) and moved over ``target`` with ``os.replace`` (atomic on POSIX and Windows); when it raises,
the temporary file is removed and ``target`` is left untouched.  Readers therefore see either the
old file or the complete new one, never a half-written file.

A write never follows a symbolic link it did not create: the temporary file is created exclusively
(``O_CREAT | O_EXCL | O_NOFOLLOW``, :func:`tempfile.mkstemp`) in the target's directory and renamed over the
target (a link there is replaced, its target untouched); :func:`atomic_file` hands the writer that exclusively
created file open, and :func:`open_for_update` reopens a file this code created (a memory-mapped partial array, a
lock) without following a link, refusing one with an error naming the file.

One writer per output at a time: :func:`exclusive_lock` is the one lock (``fcntl.flock`` on a hidden lock file), used
by the hidden-state cache (a second extractor of an entry waits) and, through :func:`output_lock`, by the command
lines for every output they write (a second command writing the same output at the same time is refused with an
error naming the output, never "succeeds" with the other's content).  A lock file is removed by its holder on
release; a waiter that locked a removed file notices and locks the new one.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "atomic_file", "open_for_update", "exclusive_lock", "output_lock", "LockHeldError",
           "atomic_write_bytes", "atomic_write_text", "write_json", "write_csv", "save_figure",
           "sha256_file", "write_checksum", "verify_checksum", "checksum_path", "ChecksumError", "cache_root",
           "refuse_overwriting_inputs", "check_write_target", "parse_json", "read_json", "json_ready",
           "naming_write_errors", "env_path", "check_path", "open_input", "read_input_bytes", "read_input_text",
           "check_input_file",
           "MAX_JSON_BYTES", "MAX_TABLE_BYTES", "MAX_ARRAY_BYTES", "MAX_MODEL_FILE_BYTES"]

MiB = 1 << 20
#: The one reader's caps, per kind of input (:func:`open_input`): JSON metadata (saved probes and concept vectors,
#: cache entries, a model's manifest and config, run records) ...
MAX_JSON_BYTES = 64 * MiB
#: ... a dataset table (CSV, TSV, JSON, JSON Lines), a checksum list, a text file read whole ...
MAX_TABLE_BYTES = 2048 * MiB
#: ... the array file of a saved probe, concept vectors or imported directions ...
MAX_ARRAY_BYTES = 16384 * MiB
#: ... and one file of a model folder (weights).
MAX_MODEL_FILE_BYTES = 256 * 1024 * MiB


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
    suffix : str, default=".tmp"
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
    fd, tmp = _exclusive_temp(target, suffix)
    os.close(fd)
    with _publishing(tmp, Path(target)):
        yield tmp


def _exclusive_temp(target, suffix: str) -> tuple[int, Path]:
    """A new file next to ``target`` created exclusively (``mkstemp``: ``O_CREAT | O_EXCL | O_NOFOLLOW``, a fresh
    random name): an existing file or link of that name is never opened.  Returns its descriptor and path."""
    target = check_write_target(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    except OSError as exc:
        raise _naming(exc, target) from None
    return fd, Path(tmp)


@contextmanager
def _publishing(tmp: Path, target: Path) -> Iterator[None]:
    """Run the block, then give ``tmp`` plain-file permissions and rename it over ``target``; ``tmp`` is removed
    when the block (or the rename) fails."""
    try:
        yield
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        named = _naming(exc, target)
        if named is exc:
            raise
        raise named from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def atomic_file(target, suffix: str = ".tmp"):
    """Like :func:`atomic_path`, but yields the exclusively created temporary file open (``"w+b"``), so that the
    writer never reopens a path by name; the file replaces ``target`` when the block succeeds.

    Parameters
    ----------
    target : str or path-like
        The file to write.
    suffix : str, default=".tmp"
        Ending of the temporary name.

    Yields
    ------
    file object
        The temporary file, open for reading and writing (closed when the block ends; a memory map made of it
        stays valid).

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "a.bin"
    >>> with atomic_file(target) as fh:
    ...     _ = fh.write(b"ok")
    >>> target.read_bytes()
    b'ok'
    """
    fd, tmp = _exclusive_temp(target, suffix)
    with _publishing(tmp, Path(target)), os.fdopen(fd, "w+b") as fh:
        yield fh


def open_for_update(path, create: bool = False) -> int:
    """Descriptor of the regular file ``path`` opened for reading and writing without following a symbolic link
    (``O_NOFOLLOW``); ``create`` creates it when absent.  For files this code created and keeps updating in place
    (a memory-mapped partial array, a lock file).

    Parameters
    ----------
    path : str or Path
        The file to open.
    create : bool, default=False
        Create the file (mode 0o666 less the umask) when it does not exist.

    Returns
    -------
    int
        An open file descriptor (read and write, blocking, close-on-exec); the caller closes it.

    Raises
    ------
    OSError
        ``path`` is a symbolic link (errno ``ELOOP``: "refusing to write through the symbolic link ..."), or cannot
        be opened; the message names ``path``.
    ValueError
        ``path`` is not a regular file (a FIFO, a device), named with its kind.

    Examples
    --------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / "link").symlink_to(d / "elsewhere")
    >>> open_for_update(d / "link", create=True)  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    OSError: [Errno 40] refusing to write through the symbolic link '.../link': ...
    >>> (d / "elsewhere").exists()
    False
    """
    path = Path(path)
    flags = (os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
             | (os.O_CREAT if create else 0))
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise OSError(errno.ELOOP, f"refusing to write through the symbolic link {str(path)!r}: a command "
                          "writes only files it created, never through a link it did not create; remove the link",
                          str(path)) from None
        raise _naming(exc, path) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ValueError(f"refusing to write {str(path)!r}: it exists and is not a regular file")
    os.set_blocking(fd, True)
    return fd


class LockHeldError(ValueError):
    """Another process (or thread) holds a lock taken without waiting (:func:`exclusive_lock` with ``wait=False``):
    an output that another command is writing now."""


def _holder_of(fd: int) -> str:
    """Who holds the lock file ``fd``, as its holder recorded it (``"process 123"``), or ``"another process"``."""
    try:
        text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"process {text}" if text.isdigit() else "another process"


@contextmanager
def exclusive_lock(path, *, wait: bool = True, what: str = ""):
    """Hold an exclusive inter-process lock (``fcntl.flock``) on the lock file ``path`` while the block runs.

    The one lock of the project: the hidden-state cache locks each entry with it (``wait=True``: a second extractor
    waits, then finds the entry done) and the command lines lock each output (:func:`output_lock`, ``wait=False``).
    The file is created (parents too) without following a symbolic link (:func:`open_for_update`), holds the
    holder's process id while held, and is removed on release, so no ``.lock`` file outlives its writer; a process
    that locked a file removed meanwhile notices (the path no longer names it) and locks the new one.

    Parameters
    ----------
    path : str or path-like
        The lock file.
    wait : bool, default=True
        Wait for the holder to release it; False: raise :class:`LockHeldError` at once.
    what : str, default=""
        What the lock protects, for the message (default: the lock file).

    Yields
    ------
    None
        The block runs holding the lock.

    Raises
    ------
    LockHeldError
        ``wait=False`` and the lock is held; the message names ``what`` and the holder's process id.
    OSError
        The lock file cannot be created (the message names it), or is a symbolic link.

    Examples
    --------
    >>> import tempfile
    >>> lock = Path(tempfile.mkdtemp()) / "out.lock"
    >>> with exclusive_lock(lock):
    ...     with exclusive_lock(lock, wait=False, what="'out'"):  # doctest: +ELLIPSIS
    ...         pass
    Traceback (most recent call last):
    ...
    empirical.common.files.LockHeldError: 'out' is being written by process ... (lock file '...out.lock')...
    >>> lock.exists()  # removed on release
    False
    """
    import fcntl  # POSIX; imported here so that the rest of this module imports everywhere

    path = Path(path)
    with naming_write_errors(path):
        path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = open_for_update(path, create=True)  # never through a link planted at the lock's name
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            holder = _holder_of(fd)
            os.close(fd)
            raise LockHeldError(f"{what or repr(str(path))} is being written by {holder} (lock file {str(path)!r}); "
                                "two writers of one output would each believe they wrote it: wait for the other to "
                                "finish, or choose another path") from None
        except BaseException:
            os.close(fd)
            raise
        try:  # the previous holder removes the file on release: then this lock is on a file nobody else sees
            current = os.stat(path, follow_symlinks=False)
            mine = os.fstat(fd)
            same = (current.st_dev, current.st_ino) == (mine.st_dev, mine.st_ino)
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:  # the holder's id is a courtesy to the next writer's message; a full disk must not stop us
            pass
        yield
    finally:
        try:
            path.unlink()  # still ours: every locker checks that the path names the file it locked
        except OSError:
            pass
        os.close(fd)


def output_lock_path(target, kind: str) -> Path:
    """The lock file of an output: ``.<name>.lock`` beside it, in its directory with links resolved (a file output
    is replaced by name, so a link at its name is not followed; a directory output is written through)."""
    target = Path(os.path.expanduser(os.fspath(target)))
    if kind == "directory":
        real = Path(os.path.realpath(target))
        return real / ".lock" if not real.name else real.parent / f".{real.name}.lock"
    parent = Path(os.path.realpath(target.parent if target.name else target))
    return parent / f".{target.name}.lock"


@contextmanager
def output_lock(target, option: str = "", kind: str = "file"):
    """Hold the lock of an output a command writes (:func:`exclusive_lock` without waiting on ``.<name>.lock``
    beside it), so that two commands writing one output at once never both report success: the second is refused
    with a :class:`LockHeldError` naming the option, the path and the process writing it.  Spellings of one path
    (``./``, ``..``, a symbolic link to its directory) share the lock.  A directory output whose parent folders do not
    exist yet (a command creates them with the output) gets them created here, to hold the lock in, and removed again
    when they are still empty at release (the command wrote nothing); a file output in a missing folder is not locked,
    since no command writes one (``cgmt sweep --out`` refuses it, and must still find the folder missing).

    Parameters
    ----------
    target : str or path-like
        The output.
    option : str, default=""
        The option that named it (``--out``), for the message.
    kind : {"file", "directory"}, default="file"
        A file (replaced by name) or a directory (written into).

    Yields
    ------
    pathlib.Path or None
        The lock file held (None: a file output's folder does not exist, nothing locked).

    Examples
    --------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "table.csv"
    >>> with output_lock(out, "--out") as held:
    ...     held.name
    '.table.csv.lock'
    """
    if kind not in ("file", "directory"):
        raise ValueError(f"kind must be 'file' or 'directory', got {kind!r:.60}")
    target = check_path(target, "target")
    lock = output_lock_path(target, kind)
    if not lock.parent.is_dir() and kind == "file":  # no command writes it: one that refuses it must still see so
        yield None
        return
    created = _make_folders(lock.parent)
    try:
        with exclusive_lock(lock, wait=False, what=f"the output {(option + ' ') if option else ''}{str(target)!r}"):
            yield lock
    finally:
        for folder in reversed(created):  # innermost first; a folder the command wrote into stays
            try:
                folder.rmdir()
            except OSError:
                break


def _make_folders(folder: Path) -> list:
    """Create ``folder`` and its missing parents; the folders this call created, outermost first (one that another
    process creates meanwhile is not ours)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    created = []
    for path in reversed(missing):
        try:
            path.mkdir()
        except FileExistsError:
            continue
        created.append(path)
    return created


def _no_space(target: Path, needed: int, free: int, hint: str) -> OSError:
    exc = OSError(errno.ENOSPC, f"not enough free space in {str(target.parent)!r} to write {target.name!r}: "
                  f"{needed:,} bytes needed, {free:,} free; {hint or 'free some space or write elsewhere'}")
    exc.names_target = True  # complete: not wrapped again by _naming
    return exc


def reserve_file_space(fd: int, size: int, target, hint: str = "") -> None:
    """Make the open regular file ``fd`` ``size`` bytes long with every byte reserved on disk, before it is memory
    mapped: a write into a memory map of a sparse file on a full disk kills the process with SIGBUS (no error, no
    clean-up).  The free space (:func:`shutil.disk_usage`) is checked first against the bytes not yet allocated,
    then ``os.posix_fallocate`` reserves them (where the platform and file system have it; elsewhere the file is
    extended, sparse, after the check).  A full disk is an ``OSError`` (``ENOSPC``) naming ``target``'s directory,
    the bytes needed and the bytes free, and ``hint`` (what to do; default "free some space or write elsewhere");
    the file keeps its previous size."""
    target = Path(target)
    st = os.fstat(fd)
    allocated = min(st.st_blocks * 512, st.st_size) if hasattr(st, "st_blocks") else st.st_size
    needed = max(0, size - min(allocated, size))
    if needed:
        free = shutil.disk_usage(target.parent).free
        if free < needed:
            raise _no_space(target, needed, free, hint)
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        try:
            fallocate(fd, 0, size)
            return
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise _no_space(target, needed, shutil.disk_usage(target.parent).free, hint) from None
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS, getattr(errno, "ENOTSUP", -1)):
                raise _naming(exc, target) from None
    if st.st_size < size:
        try:
            os.ftruncate(fd, size)
        except OSError as exc:
            raise _naming(exc, target) from None


def check_write_target(target) -> Path:
    """``target`` as a path, if a file may be written there: it does not exist or is a regular file (or a link to
    one).  Every writer calls this (:func:`atomic_path` at the write, the command lines before any work), so a
    write never replaces a device, a FIFO or a socket with a regular file.

    Parameters
    ----------
    target : str or path-like
        The file to write.

    Returns
    -------
    pathlib.Path
        ``target``.

    Raises
    ------
    IsADirectoryError
        A directory of that name exists.
    ValueError
        Something that is not a regular file exists there (a device, a FIFO, a socket), named with its kind.

    Examples
    --------
    >>> check_write_target("/dev/null")
    Traceback (most recent call last):
    ...
    ValueError: refusing to write '/dev/null': it exists and is a character device, not a regular file
    """
    target = Path(target)
    try:
        mode = target.stat().st_mode
    except (OSError, ValueError):  # does not exist (or a dangling link, which os.replace replaces)
        return target
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"cannot write {str(target)!r}: a directory of that name exists")
    if not stat.S_ISREG(mode):
        raise ValueError(f"refusing to write {str(target)!r}: it exists and is {_kind(mode)}, not a regular file")
    return target


def check_input_file(path, cap: int | None, what: str = "file") -> Path:
    """``path`` as a path, if it may be read: it exists, is (or links to) a regular file, and holds at most ``cap``
    bytes.  The one check of every file from outside (:func:`open_input` and the readers that hand a path to another
    library: pandas, numpy, gguf); links are followed, so a link to ``/dev/zero`` is refused as a device.

    Parameters
    ----------
    path : str or path-like
        The file.
    cap : int or None
        Most bytes accepted (one of the ``MAX_*_BYTES`` constants); None: any size (streamed readers).
    what : str, default="file"
        What the file is, for messages.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Naming the path: not a regular file (its kind named), or larger than ``cap``.

    Examples
    --------
    >>> check_input_file("/dev/zero", MAX_JSON_BYTES)
    Traceback (most recent call last):
    ...
    ValueError: refusing to read file '/dev/zero': it is a character device, not a regular file
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist") from None
    _check_input_stat(path, st, cap, what)
    return path


def _check_input_stat(path: Path, st: os.stat_result, cap: int | None, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"refusing to read {what} {str(path)!r}: it is {_kind(st.st_mode)}, not a regular file")
    if cap is not None and st.st_size > cap:
        raise ValueError(f"refusing to read {what} {str(path)!r}: {st.st_size} bytes is more than the "
                         f"{cap // MiB} MiB accepted for it")


@contextmanager
def open_input(path, cap: int | None, what: str = "file"):
    """The file ``path`` opened for binary reading, if :func:`check_input_file` accepts it (checked on the open
    file, so a FIFO never blocks the open and a file swapped after the check is still refused).

    Parameters
    ----------
    path : str or path-like
        The file.
    cap : int or None
        Most bytes accepted; None: any size.
    what : str, default="file"
        What the file is, for messages.

    Yields
    ------
    io.BufferedReader
        The open file.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist") from None
    try:
        _check_input_stat(path, os.fstat(fd), cap, what)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as f:
        yield f


def read_input_bytes(path, cap: int, what: str = "file") -> bytes:
    """The bytes of ``path`` through :func:`open_input` (a regular file of at most ``cap`` bytes, also if it grows
    while read).

    Parameters
    ----------
    path : str or path-like
        The file.
    cap : int
        Most bytes accepted.
    what : str, default="file"
        What the file is, for messages.

    Returns
    -------
    bytes
        Its content.
    """
    with open_input(path, cap, what) as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise ValueError(f"refusing to read {what} {str(path)!r}: more than the {cap // MiB} MiB accepted for it")
    return data


def read_input_text(path, cap: int, what: str = "file") -> str:
    """The UTF-8 text of ``path`` through :func:`read_input_bytes`; a ``ValueError`` naming it when it is not UTF-8.

    Parameters
    ----------
    path : str or path-like
        The file.
    cap : int
        Most bytes accepted.
    what : str, default="file"
        What the file is, for messages.

    Returns
    -------
    str
        Its text.
    """
    data = read_input_bytes(path, cap, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "a special file"


def _naming(exc: OSError, target: Path) -> OSError:
    """``exc`` (same class and errno) with a message naming ``target``, the file being written (a full disk or
    a file-size limit otherwise reports only ``[Errno 27] File too large``, or the temporary file's name)."""
    if getattr(exc, "names_target", False):  # already says what was being written (a full disk, _no_space)
        return exc
    reason = exc.strerror or str(exc)
    return type(exc)(exc.errno, f"{reason} (while writing {str(target)!r})", str(target))


@contextmanager
def naming_write_errors(target):
    """Re-raise an ``OSError`` inside the block (same class and errno) with a message naming ``target``: for
    writes that cannot go through :func:`atomic_path` (a memory-mapped file being filled, a rename).

    Parameters
    ----------
    target : str or path-like
        The file being written, named in the message.

    Yields
    ------
    None
        The block runs inside; other exceptions pass unchanged.

    Examples
    --------
    >>> with naming_write_errors("out.npy"):  # doctest: +IGNORE_EXCEPTION_DETAIL
    ...     raise OSError(27, "File too large")
    Traceback (most recent call last):
    OSError: [Errno 27] File too large (while writing 'out.npy')
    """
    try:
        yield
    except OSError as exc:
        named = _naming(exc, Path(target))
        if named is exc:
            raise
        raise named from None


def atomic_write_bytes(target, data: bytes) -> Path:
    """Write ``data`` to ``target`` atomically.

    Parameters
    ----------
    target : str or path-like
        The file to write (parent directories are created).
    data : bytes
        Its new content.

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
        The file to write (parent directories are created).
    text : str
        Its new content (encoded with the platform's default encoding, as ``Path.write_text``).

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
        The file to write.
    obj : JSON-serializable object (numpy scalars allowed)
        The document.
    indent : int, default=1
        As for :func:`json.dumps`.

    Returns
    -------
    pathlib.Path
        ``target``.

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
        The file to write.
    frame : pandas.DataFrame
        The table (its index is not written).

    Returns
    -------
    pathlib.Path
        ``target``.

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
        The figure; closed (``plt.close``) after a successful write, left open if the write raises.
    target : str or path-like
        The PNG file to write.
    dpi : int, default=130
        Resolution (saved with ``bbox_inches="tight"``).

    Returns
    -------
    pathlib.Path
        ``target``.
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
        The file.
    chunk : int, default=4 MiB
        Bytes read at a time.

    Returns
    -------
    str
        64 lower-case hex digits.

    Examples
    --------
    >>> import tempfile
    >>> sha256_file(atomic_write_bytes(Path(tempfile.mkdtemp()) / "e", b""))[:16]
    'e3b0c44298fc1c14'
    """
    digest = hashlib.sha256()
    with open_input(path, None) as f:  # a regular file (never a device: /dev/zero would be hashed forever)
        for block in iter(lambda: f.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


class ChecksumError(ValueError):
    """A file does not match the checksum recorded when it was written (or has none): damaged or edited."""


def checksum_path(target) -> Path:
    """The hidden sidecar ``.<name>.sha256`` beside ``target`` where :func:`write_checksum` records its sum.

    Parameters
    ----------
    target : str or path-like
        The file.

    Returns
    -------
    pathlib.Path

    Examples
    --------
    >>> checksum_path("run/tables/t.csv").name
    '.t.csv.sha256'
    """
    target = Path(target)
    return target.parent / f".{target.name}.sha256"


_checksum_path = checksum_path


def write_checksum(target) -> Path:
    """Record the sha256 of ``target`` (just written) in the hidden sidecar ``.<name>.sha256`` next to it.

    A file written this way and read back through :func:`verify_checksum` is never trusted after a
    change: results a program resumes from (``paper_figures`` tables, raw evaluations) use the pair.

    Parameters
    ----------
    target : str or path-like
        The file whose checksum is recorded (it must exist).

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
    empirical.common.files.ChecksumError: ... does not match the checksum recorded when it was written ...
    """
    target = Path(target)
    atomic_write_text(_checksum_path(target), sha256_file(target) + "\n")
    return target


def verify_checksum(target) -> bool:
    """True if ``target`` exists and matches its recorded checksum, False if it does not exist.

    Parameters
    ----------
    target : str or path-like
        The file, written with :func:`write_checksum`.

    Returns
    -------
    bool
        True when it matches, False when ``target`` does not exist (a missing sidecar or a mismatch raises).

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
        recorded = read_input_text(sidecar, MiB, "checksum file").strip()
    except (OSError, ValueError):
        raise ChecksumError(f"{str(target)!r} has no recorded checksum ({sidecar.name} is missing or unreadable); "
                            "it may be incomplete") from None
    if recorded != sha256_file(target):
        raise ChecksumError(f"{str(target)!r} does not match the checksum recorded when it was written "
                            "(damaged or edited)")
    return True


def check_path(value, name: str) -> Path:
    """``value`` as a path (``~`` expanded), if it is one: a ``str`` or path-like object that is not empty or blank
    (``Path("")`` would silently mean the working directory).  The one check of a path argument of the API, as
    :func:`empirical.common.cli_args.nonempty_path` is the command lines' and :func:`env_path` the environment's.

    Parameters
    ----------
    value : str or path-like
        The argument.
    name : str
        The argument's name, used in the message.

    Returns
    -------
    pathlib.Path
        The path (not resolved; whether it exists is the caller's question).

    Raises
    ------
    TypeError
        Not a ``str`` or path-like object (bytes included: paths here are text).
    ValueError
        Empty or blank.

    Examples
    --------
    >>> check_path("~/data", "data_dir") == Path.home() / "data"
    True
    >>> check_path(" ", "data_dir")
    Traceback (most recent call last):
    ...
    ValueError: data_dir must be a non-empty path, got ' '
    """
    if not isinstance(value, (str, os.PathLike)) or isinstance(os.fspath(value), bytes):
        raise TypeError(f"{name} must be a path (str or path-like), got {type(value).__name__} {value!r}"[:200])
    if not str(os.fspath(value)).strip():
        raise ValueError(f"{name} must be a non-empty path, got {os.fspath(value)!r}")
    return Path(value).expanduser()


def cache_root(cache_dir=None) -> Path:
    """The user cache directory: argument > ``$RAPTOR_CACHE`` (checked by :func:`env_path`) > ``~/.cache/raptor``.

    Parameters
    ----------
    cache_dir : str or path-like, optional
        An explicit directory (``~`` expanded); an empty or blank string is a ``ValueError``.

    Returns
    -------
    pathlib.Path
        The directory (not created here).

    Examples
    --------
    >>> cache_root("/tmp/my-cache")
    PosixPath('/tmp/my-cache')
    """
    if cache_dir is not None:
        return check_path(cache_dir, "cache_dir")
    env = env_path("RAPTOR_CACHE")
    return env if env is not None else Path.home() / ".cache" / "raptor"


def env_path(name: str) -> Path | None:
    """The path in environment variable ``name`` (``~`` expanded), checked as the command-line options check theirs:
    the one rule for every variable the project reads as a path (``RAPTOR_CACHE``, ``RAPTOR_DATA``,
    ``RAPTOR_SMOLLM2_WHEEL``).  Unset or empty (``VAR= command``) is None (the default applies); a value of spaces
    only is refused (a directory named ``' '`` is never meant).

    Parameters
    ----------
    name : str
        The variable.

    Returns
    -------
    pathlib.Path or None
        The path, or None when the variable is unset or empty.

    Raises
    ------
    ValueError
        Naming the variable when its value is blank.

    Examples
    --------
    >>> os.environ["RAPTOR_EXAMPLE_PATH"] = " "
    >>> env_path("RAPTOR_EXAMPLE_PATH")
    Traceback (most recent call last):
    ...
    ValueError: environment variable RAPTOR_EXAMPLE_PATH=' ' is blank: unset it or give a non-empty path
    >>> del os.environ["RAPTOR_EXAMPLE_PATH"]
    """
    value = os.environ.get(name)
    if not value:
        return None
    if not value.strip():
        raise ValueError(f"environment variable {name}={value!r} is blank: unset it or give a non-empty path")
    return Path(value).expanduser()


def refuse_overwriting_inputs(outputs, inputs) -> None:
    """Refuse to write any of ``outputs`` when it is, or aliases, one of ``inputs``.

    Every command that reads some files and writes others calls this before any work, so an output path
    never replaces the data it was computed from: the same path, another spelling of it (relative or
    absolute, ``..``), a symbolic link to it and a hard link (the same inode) are all refused.  Directories
    compare the same way (e.g. an output directory that is the data directory).

    Parameters
    ----------
    outputs : iterable of (str, path) or path
        The paths to write, each optionally with the name of the option that gave it (``("--out", path)``).
    inputs : iterable of (str, path) or path
        The paths read, likewise.  Inputs that do not exist are ignored.

    Raises
    ------
    ValueError
        Naming both paths and the options they came from.

    Examples
    --------
    >>> import tempfile
    >>> table = atomic_write_text(Path(tempfile.mkdtemp()) / "t.csv", "a,b")
    >>> refuse_overwriting_inputs([("--out", table.parent / "." / "t.csv")], [("--table", table)])
    Traceback (most recent call last):
    ...
    ValueError: refusing to write --out '...t.csv': it is the input --table '...t.csv' (the same file); choose another
    output path
    """
    def named(items):
        for item in items:
            name, path = item if isinstance(item, tuple) else ("", item)
            yield name, Path(path).expanduser()

    def identity(path: Path):
        try:
            st = path.stat()
        except (OSError, ValueError):
            return None
        return st.st_dev, st.st_ino

    read = [(name, path, identity(path)) for name, path in named(inputs)]
    read = [entry for entry in read if entry[2] is not None]
    for out_name, out in named(outputs):
        out_id = identity(out)
        if out_id is None:
            continue
        for in_name, path, in_id in read:
            if out_id == in_id:
                what = "directory" if out.is_dir() else "file"
                raise ValueError(f"refusing to write {(out_name + ' ') if out_name else ''}{str(out)!r}: it is the "
                                 f"input {(in_name + ' ') if in_name else ''}{str(path)!r} (the same {what}); "
                                 "choose another output path")


class _NonFinite(ValueError):
    pass


def _refuse_constant(name: str):
    raise _NonFinite(name)


def _no_duplicate_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice in one object (ambiguous)")
        seen[key] = value
    return seen


def _first_non_finite(obj):
    """JSON path (``a.b[2]``) of the first non-finite float in ``obj``, or None (iterative, any depth)."""
    stack = [("", obj)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return where or "(top level)"
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return None


def parse_json(text: str, where: str, line: int | None = None):
    """Parse JSON strictly, with errors that name ``where`` (the file, and line when given).

    Refused, each as a ``ValueError`` naming ``where``: invalid JSON (line and column), ``NaN`` and
    ``Infinity`` and numbers that overflow a float (the JSON path of the value is named), integers longer
    than Python converts (4300 digits), nesting deeper than the interpreter's recursion limit, and a key
    that appears twice in one object.

    Parameters
    ----------
    text : str
        The JSON text.
    where : str
        What is parsed, for messages (e.g. ``"'probes.json'"``).
    line : int, optional
        The line of a JSON Lines file that ``text`` is (named in messages).

    Returns
    -------
    object
        The parsed document (dict, list, str, number, bool or None).

    Examples
    --------
    >>> parse_json('{"a": [1, NaN]}', "'m.json'")
    Traceback (most recent call last):
    ...
    ValueError: 'm.json': the value at a[1] is NaN (JSON holds finite numbers only)
    """
    if line is not None:
        try:
            return parse_json(text, f"{where}, line {line}")
        except ValueError as exc:  # one line of a JSON Lines file: its position is a column
            message = str(exc)
            position = re.search(r" is not valid JSON: (.*) at line \d+, column (\d+)$", message)
            if position is None:
                raise
            raise ValueError(f"{where}, line {line}: not valid JSON ({position.group(1)} at column "
                             f"{position.group(2)})") from None
    try:
        obj = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_no_duplicate_keys)
    except _NonFinite as exc:
        try:  # find where: parse again, letting the constant through
            obj = json.loads(text)
        except (ValueError, RecursionError):
            obj = None
        raise ValueError(f"{where}: the value at {_first_non_finite(obj)} is {exc} "
                         "(JSON holds finite numbers only)") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply to read") from None
    except ValueError as exc:  # integer digit limit, duplicate keys
        raise ValueError(f"{where}: {exc}") from None
    bad = _first_non_finite(obj)
    if bad is not None:
        raise ValueError(f"{where}: the value at {bad} overflows a float (JSON holds finite numbers only)")
    return obj


def read_json(path, what: str = "file", cap: int = MAX_JSON_BYTES):
    """The JSON document in ``path`` (UTF-8, read by :func:`read_input_text`), parsed by :func:`parse_json`;
    errors name the file.

    Parameters
    ----------
    path : str or path-like
        The file.
    what : str, default="file"
        What the file is, for the not-found message.
    cap : int, default=MAX_JSON_BYTES
        Most bytes accepted.

    Returns
    -------
    object
        The parsed document.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Not a regular file, larger than ``cap``, not UTF-8, or refused by :func:`parse_json`.
    """
    path = Path(path)
    return parse_json(read_input_text(path, cap, what), repr(str(path)))


#: deepest nesting of lists / mappings that :func:`json_ready` accepts (a self-referencing mapping is infinitely deep)
MAX_JSON_DEPTH = 64


def json_ready(obj, where: str = "metadata", _depth: int = 0):
    """A copy of ``obj`` that JSON stores exactly: numpy scalars become Python numbers, tuples lists.

    Refused with a ``ValueError`` naming the field (``where.key[i]``): non-finite numbers, keys that are not
    strings (JSON would turn ``1`` into ``"1"``), any other object (arrays, paths, classes...), and nesting
    deeper than :data:`MAX_JSON_DEPTH` (a self-referencing mapping included).

    Parameters
    ----------
    obj : object
        JSON-like data: None, str, bool, int, float, numpy scalars, dicts with string keys, lists and tuples.
    where : str, default="metadata"
        Name of ``obj`` in messages.
    _depth : int, default=0
        Nesting level of ``obj`` (internal: the recursion counts it against :data:`MAX_JSON_DEPTH`).

    Returns
    -------
    object
        The copy, of built-in types only.

    Examples
    --------
    >>> import numpy as np
    >>> json_ready({"n": np.int64(3), "r": (np.float32(0.5),)})
    {'n': 3, 'r': [0.5]}
    """
    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if hasattr(obj, "dtype") and getattr(obj, "shape", None) == () and hasattr(obj, "item"):
        obj = obj.item()  # numpy scalar
        if not isinstance(obj, (bool, int, float, str)):
            raise ValueError(f"{where} must be JSON data, got a {type(obj).__name__}")
        return json_ready(obj, where, _depth)
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"{where} must be a finite number, got {obj!r}")
        return float(obj)
    if isinstance(obj, (dict, list, tuple)) and _depth >= MAX_JSON_DEPTH:
        name = ".".join(where.split(".")[:2]).split("[")[0]
        raise ValueError(f"{name} is nested deeper than {MAX_JSON_DEPTH} levels (or refers to itself); flatten it")
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} keys must be strings, got {key!r} ({type(key).__name__})")
            out[key] = json_ready(value, f"{where}.{key}", _depth + 1)
        return out
    if isinstance(obj, (list, tuple)):
        return [json_ready(value, f"{where}[{i}]", _depth + 1) for i, value in enumerate(obj)]
    raise ValueError(f"{where} must be JSON data (str, number, bool, None, list, dict), got a {type(obj).__name__}")
