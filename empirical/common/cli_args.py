"""Argument types shared by the project's command lines (``cgmt``, ``raptor``, ``python -m paper_figures``).

Every option is checked when it is parsed, before any work: its range (an integer is an integer, a number is
finite and in its interval, a count has an upper bound, a list has no repeats), so a bad value is one argparse
error naming the option (``argument --jobs: ...``, exit 2) instead of a NaN in an output file, a worker storm
or a traceback at the end of a run.  Each factory returns a function for ``add_argument(type=...)``.

Every option naming something the command writes is declared once, with :func:`output_path` (a file in the formats
its name may say, or a directory): the name of a file must say the format written (``--plot a.csv`` is refused), and
:func:`enforce_options` refuses two outputs of one command that are the same file or directory (also spelled
differently: ``./a.csv``, an absolute path, a symbolic or hard link) before anything runs, and
:func:`holding_outputs` runs the command holding the lock of each output (:func:`empirical.common.files.output_lock`),
so that a second command writing the same output at the same time is refused instead of both reporting success.

Worker counts (``--jobs``, ``--n-jobs``, ``--threads``) are bounded by the CPU cores this process may use
(:func:`empirical.common.resources.available_cores`): more is an error, not a silent clamp, because asking for
more workers than cores only adds memory and start-up time (and a flood of processes that Ctrl-C must then stop).
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import stat
from contextlib import ExitStack
from importlib import metadata
from pathlib import Path

from .files import output_lock, output_lock_path
from .resources import available_cores

__all__ = ["add_version", "available_cores", "enforce_options", "holding_outputs", "int_in", "number_in", "number_list",
           "nonempty_path",
           "output_path", "output_options", "check_output_suffix", "IMAGE_SUFFIXES", "program_version", "subparser",
           "worker_count"]

#: the image formats a figure option accepts, by file name (matplotlib writes each; tests/test_cli_outputs.py checks)
IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".eps", ".ps")


def _named(parse, name: str):
    parse.__name__ = name  # argparse names the type in "invalid <name> value" messages
    return parse


def int_in(low: int, high: int | None = None, what: str = ""):
    """An integer in ``[low, high]`` (``high=None``: no upper bound); ``what`` says where ``high`` comes from.

    Parameters
    ----------
    low : int
        Smallest value accepted.
    high : int or None, default=None
        Largest value accepted; None: no upper bound.
    what : str, default=""
        Where ``high`` comes from, added in parentheses to the error message (empty: nothing added).

    Returns
    -------
    callable
        ``parse(text) -> int`` for ``add_argument(type=...)``; it raises ``argparse.ArgumentTypeError`` for text
        that is not an integer in the range.

    Examples
    --------
    >>> int_in(1, 10)("3")
    3
    >>> int_in(1, 10, "the documented maximum")("2.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an integer in [1, 10] (the documented maximum), got '2.5'
    """
    span = f"[{low}, {high}]" if high is not None else f">= {low}"
    reason = f" ({what})" if what else ""

    def parse(text):
        try:
            value = int(str(text).strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer {'in ' if high is not None else ''}{span}{reason}, "
                                             f"got {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"expected an integer {'in ' if high is not None else ''}{span}{reason}, "
                                             f"got {value}")
        return value
    return _named(parse, "integer")


def worker_count(option_meaning: str = "workers"):
    """An integer in ``[1, available_cores()]`` (parallel workers or threads).

    Parameters
    ----------
    option_meaning : str, default="workers"
        What the option counts, named in the error message.

    Returns
    -------
    callable
        ``parse(text) -> int`` for ``add_argument(type=...)`` (see :func:`int_in`).

    Examples
    --------
    >>> worker_count()("1")
    1
    """
    return int_in(1, available_cores(), f"{option_meaning}: at most the {available_cores()} CPU cores available")


def _interval_text(low, high, low_open, high_open) -> str:
    return f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def _check_number(text, low, high, low_open, high_open) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    if value < low or value > high or (low_open and value == low) or (high_open and value == high):
        raise argparse.ArgumentTypeError(f"expected a number in {_interval_text(low, high, low_open, high_open)}, "
                                         f"got {text!r}")
    return value


def number_in(low: float = -math.inf, high: float = math.inf, *, low_open: bool = False, high_open: bool = False):
    """A finite number in the interval (``low_open`` / ``high_open`` exclude the bound).

    Parameters
    ----------
    low, high : float, default=-inf, inf
        Bounds of the interval.
    low_open, high_open : bool, default=False
        Exclude ``low`` / ``high`` themselves.

    Returns
    -------
    callable
        ``parse(text) -> float`` for ``add_argument(type=...)``; it raises ``argparse.ArgumentTypeError`` for text
        that is not a finite number in the interval.

    Examples
    --------
    >>> number_in(0.0, 1.0, low_open=True)("0.5")
    0.5
    >>> number_in(0.0, 1.0, low_open=True)("nan")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a finite number, got 'nan'
    """
    return _named(lambda text: _check_number(text, low, high, low_open, high_open), "number")


def number_list(low: float = -math.inf, high: float = math.inf, *, low_open: bool = False, high_open: bool = False,
                min_count: int = 1, sort: bool = False):
    """Comma-separated distinct finite numbers in the interval, at least ``min_count`` of them (sorted with
    ``sort``, for lists whose order has no meaning).

    Parameters
    ----------
    low, high : float, default=-inf, inf
        Bounds of the interval every number must lie in.
    low_open, high_open : bool, default=False
        Exclude ``low`` / ``high`` themselves.
    min_count : int, default=1
        Fewest numbers accepted.
    sort : bool, default=False
        Return the numbers sorted (ascending) instead of in the order given.

    Returns
    -------
    callable
        ``parse(text) -> list of float`` for ``add_argument(type=...)``; it raises ``argparse.ArgumentTypeError``
        for an empty entry, a number outside the interval, a repeat or too few numbers.

    Examples
    --------
    >>> number_list(0.0, 1.0, low_open=True, min_count=3, sort=True)("1,0.25,0.5")
    [0.25, 0.5, 1.0]
    >>> number_list(0.0, 1.0, min_count=3)("0.5,0.5,0.5")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected distinct values, got 0.5 more than once in '0.5,0.5,0.5'
    """
    def parse(text):
        parts = [t.strip() for t in str(text).split(",")]
        if any(not t for t in parts):
            raise argparse.ArgumentTypeError(f"expected comma-separated numbers without empty entries, got {text!r}")
        values = [_check_number(t, low, high, low_open, high_open) for t in parts]
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise argparse.ArgumentTypeError(f"expected distinct values, got {', '.join(f'{v:g}' for v in repeated)} "
                                             f"more than once in {text!r}")
        if len(values) < min_count:
            raise argparse.ArgumentTypeError(f"expected at least {min_count} values, got {len(values)} in {text!r}")
        return sorted(values) if sort else values
    return _named(parse, "number list")


def nonempty_path(text) -> str:
    """A path (returned as given, a ``str``) that is not empty or blank (``''`` would silently mean the working
    directory).

    Parameters
    ----------
    text : str
        The command-line text.

    Returns
    -------
    str
        ``text`` unchanged.

    Raises
    ------
    argparse.ArgumentTypeError
        ``text`` is empty or only whitespace.

    Examples
    --------
    >>> nonempty_path("out")
    'out'
    >>> nonempty_path(" ")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a non-empty path, got ' '
    """
    if not str(text).strip():
        raise argparse.ArgumentTypeError(f"expected a non-empty path, got {text!r}")
    return str(text)


nonempty_path.__name__ = "path"


def check_output_suffix(option: str, path, suffixes) -> None:
    """Refuse to write ``path`` when its name does not say one of the formats ``suffixes`` (``.csv``, ``.png``, ...,
    compared without case): a file is written in the format its name says, or not at all.

    Parameters
    ----------
    option : str
        The option that named the file (``--plot``), for the message.
    path : str or path-like
        The file to write.
    suffixes : iterable of str
        The suffixes of the formats the command can write there.

    Returns
    -------
    None

    Raises
    ------
    ValueError
        The name ends in another suffix, or in none.

    Examples
    --------
    >>> check_output_suffix("--out", "a.tsv", (".csv",))
    Traceback (most recent call last):
    ...
    ValueError: --out 'a.tsv': the name says .tsv, but this file is written as .csv; give a name in that format
    """
    if isinstance(suffixes, (str, bytes)) or not isinstance(suffixes, (list, tuple)) or not suffixes \
            or not all(isinstance(s, str) for s in suffixes):
        raise TypeError(f"suffixes must be a non-empty list or tuple of file suffixes, got {suffixes!r:.60}")
    suffixes = tuple(s.lower() for s in suffixes)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or path-like, got {path!r:.60} ({type(path).__name__})")
    suffix = Path(os.fspath(path)).suffix.lower()
    if suffix not in suffixes:
        formats = suffixes[0] if len(suffixes) == 1 else f"{', '.join(suffixes[:-1])} or {suffixes[-1]}"
        said = f"says {suffix}" if suffix else "has no suffix"
        raise ValueError(f"{option} {str(path)!r}: the name {said}, but this file is written as {formats}; give a "
                         "name in that format")


def output_path(kind: str = "file", suffixes=(), *, convert=None):
    """The ``add_argument(type=...)`` of an option naming something the command writes: a non-empty path
    (:func:`nonempty_path`), marked as an output, so that :func:`enforce_options` refuses two outputs of one command
    that are the same file or directory, and, for a file, named in one of the formats ``suffixes``.

    Parameters
    ----------
    kind : {"file", "directory"}, default="file"
        What is written at the path.
    suffixes : tuple of str, optional
        The suffixes of the formats the command writes there (``(".csv",)``, :data:`IMAGE_SUFFIXES`); empty: the
        command checks the name itself (a format chosen by another option, ``raptor export --format``).  A path that
        exists as a directory, FIFO or device is left to the command's own check, which names it as one.
    convert : callable, optional
        Applied to the text after the checks (e.g. ``pathlib.Path``).

    Returns
    -------
    callable
        ``parse(text)`` for ``add_argument(type=...)``, with the attributes ``output`` (``kind``) and ``suffixes``.

    Examples
    --------
    >>> output_path("file", (".csv",))("table.csv")
    'table.csv'
    >>> output_path("file", (".csv",))("table.tsv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'table.tsv': the name says .tsv, but this file is written as .csv; ...
    """
    if kind not in ("file", "directory"):
        raise ValueError(f"kind must be 'file' or 'directory', got {kind!r:.60}")
    if isinstance(suffixes, (str, bytes)) or not isinstance(suffixes, (list, tuple)):
        raise TypeError(f"suffixes must be a list or tuple of file suffixes, got {suffixes!r:.60}")
    for i, suffix in enumerate(suffixes):
        if not (isinstance(suffix, str) and len(suffix) > 1 and suffix.startswith(".") and suffix.strip() == suffix):
            raise ValueError(f"suffixes[{i}] must be a file suffix such as '.csv', got {suffix!r:.60}")
    suffixes = tuple(s.lower() for s in suffixes)
    if kind == "directory" and suffixes:
        raise ValueError(f"suffixes must be empty for a directory (it has no format), got {suffixes!r}")
    if convert is not None and not callable(convert):
        raise TypeError(f"convert must be callable or None, got {convert!r:.60}")

    def parse(text):
        value = nonempty_path(text)
        if suffixes and not _not_a_regular_file(value):
            try:
                check_output_suffix("", value, suffixes)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc).lstrip()) from None
        return value if convert is None else convert(value)

    parse.output = kind
    parse.suffixes = suffixes
    return _named(parse, "path")


def _not_a_regular_file(path) -> bool:
    """Whether ``path`` exists as something else than a regular file (a directory, a FIFO, a device): the command's
    own check refuses it naming what it is, before a name's format matters."""
    try:
        return not stat.S_ISREG(os.stat(os.path.expanduser(path)).st_mode)
    except (OSError, ValueError):
        return False


def output_options(parser) -> list:
    """The output options of ``parser`` (declared with :func:`output_path`), as ``(option, dest, kind, suffixes)``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A parser or subparser.

    Returns
    -------
    list of tuple

    Examples
    --------
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> _ = parser.add_argument("--out", type=output_path("file", (".csv",)))
    >>> output_options(parser)
    [('--out', 'out', 'file', ('.csv',))]
    """
    return [(action.option_strings[-1], action.dest, action.type.output, action.type.suffixes)
            for action in parser._actions if action.option_strings and hasattr(action.type, "output")]


def _identity(path):
    """What a path names: an existing file's (device, inode), so that a hard link is the same file; else the path
    with every symbolic link resolved (a dangling one too) and ``.``/``..`` removed."""
    path = os.path.expanduser(os.fspath(path))
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return ("path", os.path.realpath(path))
    return ("inode", st.st_dev, st.st_ino)


def _refuse_shared_outputs(parser, args) -> None:
    """Exit 2 (``parser.error``) when two output options of ``parser`` name the same file or directory."""
    given = [(option, kind, getattr(args, dest)) for option, dest, kind, _ in output_options(parser)
             if getattr(args, dest, None) is not None]
    for (first, kind, a), (second, _, b) in itertools.combinations(given, 2):
        if _identity(a) == _identity(b):
            parser.error(f"refusing to write {first} {str(a)!r} and {second} {str(b)!r}: they are the same {kind} "
                         "(one output would replace the other); give each its own path")


def holding_outputs(parser, args, body):
    """Run ``body()`` holding the lock of every output option of ``parser`` given in ``args``
    (:func:`empirical.common.files.output_lock`: a file is locked by name, a directory as a whole), so that two
    commands writing one output at the same time never both report success: the second stops before any work with a
    ``LockHeldError`` (a ``ValueError``: one ``error:`` line and exit 2 under
    :func:`empirical.common.cli_errors.run_command`) naming the option, the path and the process writing it.  The
    locks are released (their files removed) when ``body`` returns or raises.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser (or subparser) that declared the outputs (:func:`output_path`).
    args : argparse.Namespace
        The parsed options.
    body : callable
        The command; called without arguments.

    Returns
    -------
    object
        What ``body()`` returns (the exit code).

    Examples
    --------
    >>> import argparse, tempfile
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> _ = parser.add_argument("--out", type=output_path("file", (".csv",)))
    >>> args = parser.parse_args(["--out", os.path.join(tempfile.mkdtemp(), "t.csv")])
    >>> holding_outputs(parser, args, lambda: 0)
    0
    """
    if not isinstance(parser, argparse.ArgumentParser):
        raise TypeError(f"parser must be an argparse.ArgumentParser, got {type(parser).__name__}")
    if not isinstance(args, argparse.Namespace):
        raise TypeError(f"args must be an argparse.Namespace, got {type(args).__name__}")
    if not callable(body):
        raise TypeError(f"body must be callable, got {body!r:.60}")
    given = [(option, getattr(args, dest), kind) for option, dest, kind, _ in output_options(parser)
             if getattr(args, dest, None) is not None]
    with ExitStack() as stack:  # a stable order (by lock file), so two commands never wait on each other in a cycle
        for option, path, kind in sorted(given, key=lambda g: str(output_lock_path(g[1], g[2]))):
            stack.enter_context(output_lock(path, option, kind))
        return body()


def program_version(distribution: str = "raptor-probes") -> str:
    """The installed package version (``importlib.metadata``), else ``"unknown (not installed)"``.

    Parameters
    ----------
    distribution : str, default="raptor-probes"
        The distribution name of ``pyproject.toml``.

    Returns
    -------
    str
        The version.

    Examples
    --------
    >>> isinstance(program_version(), str)
    True
    """
    if not isinstance(distribution, str) or not distribution.strip():
        raise TypeError(f"distribution must be a non-blank distribution name, got {distribution!r}")
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def add_version(parser) -> None:
    """``--version``: print ``PROG VERSION`` and exit 0 (the same for the three command lines).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The program's top-level parser.

    Returns
    -------
    None

    Examples
    --------
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> add_version(parser)
    >>> "--version" in parser.format_usage()
    True
    """
    parser.add_argument("--version", action="version", version=f"%(prog)s {program_version()}")


def _given(parser, args, option: str) -> bool:
    """Whether ``option`` was given explicitly: its value differs from the parser's default."""
    for action in parser._actions:
        if option in action.option_strings:
            return getattr(args, action.dest, None) != parser.get_default(action.dest)
    raise KeyError(f"{option} is not an option of {parser.prog}")  # a table naming an unknown option is a bug


def subparser(parser, name: str):
    """The subparser of command ``name`` in ``parser`` (``raptor NAME``, ``cgmt NAME``).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        A parser with subcommands.
    name : str
        The subcommand.

    Returns
    -------
    argparse.ArgumentParser

    Examples
    --------
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> _ = parser.add_subparsers(dest="cmd").add_parser("run")
    >>> subparser(parser, "run").prog
    'demo run'
    """
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def enforce_options(parser, args, table: dict) -> None:
    """Enforce a command's option table after ``parse_args`` (exit 2, one line naming the options).

    ``table`` (data, one per command) has the keys ``"needs"`` (option -> the mode option it applies with:
    given without it, it would be silently ignored), ``"excludes"`` (pairs that contradict each other),
    ``"distinct"`` (list options whose entries must not repeat) and ``"nonempty"`` (name options that must not
    be the empty string).  Whatever the table, two output options (:func:`output_path`) naming the same file or
    directory, in any spelling, are refused.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The parser (or subparser) that parsed ``args``; its defaults tell which options were given.
    args : argparse.Namespace
        The parsed options.
    table : dict
        The command's option table.

    Returns
    -------
    None
        Or exit 2 through ``parser.error``.

    Examples
    --------
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> _ = parser.add_argument("--sweep", action="store_true")
    >>> _ = parser.add_argument("--setting")
    >>> enforce_options(parser, parser.parse_args(["--sweep"]), {"excludes": [("--setting", "--sweep")]})
    """
    for option, mode in table.get("needs", {}).items():
        if _given(parser, args, option) and not _given(parser, args, mode):
            parser.error(f"{option} applies only with {mode} (without it, {option} would be ignored)")
    for first, second in table.get("excludes", ()):
        if _given(parser, args, first) and _given(parser, args, second):
            parser.error(f"{first} and {second} exclude each other: give one of them")
    for option in table.get("distinct", ()):
        values = getattr(args, option.lstrip("-").replace("-", "_"), None)
        values = [] if values is None else list(values)
        repeated = sorted({v for i, v in enumerate(values) if v in values[:i]}, key=str)
        if repeated:
            parser.error(f"{option} lists {', '.join(map(str, repeated))} more than once")
    for option in table.get("nonempty", ()):
        value = getattr(args, option.lstrip("-").replace("-", "_"), None)
        if isinstance(value, str) and not value.strip():
            parser.error(f"{option} must not be empty")
    _refuse_shared_outputs(parser, args)
