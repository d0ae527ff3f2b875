"""The error convention shared by the project's command-line programs (``cgmt``, ``raptor``,
``python -m paper_figures``).

A ``ValueError`` or ``OSError`` (bad input, missing or damaged file) becomes one line
``PROG: error: MESSAGE`` on stderr and exit code 2, or the full traceback as well when the user asks
for it (``--debug`` or a debug environment variable); a :class:`~empirical.common.failures.ConvergenceError` (a
solver asked to be strict, e.g. ``cgmt solve --strict``, that did not converge) the same one line, which names the
point and the reason, and exit code 1, the code of a result that did not converge; Ctrl-C becomes one line and exit
code 130, and a
termination request (SIGTERM: ``kill``, a scheduler's stop or time limit, e.g. SLURM's) is handled the same way, with
exit code 143, so that the program's clean-up runs (the main job records how long its invocation ran).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import traceback

from .failures import ConvergenceError

__all__ = ["debug_requested", "run_command", "Terminated"]


class Terminated(KeyboardInterrupt):
    """Raised in the main thread when the process receives SIGTERM during :func:`run_command` (a
    ``KeyboardInterrupt``, so every clean-up that handles Ctrl-C handles it too)."""


def _raise_terminated(signum, frame):
    raise Terminated(f"signal {signum}")


def debug_requested(flag: bool, env_var: str) -> bool:
    """True when ``--debug`` was given or the environment variable ``env_var`` is set to anything but 0.

    Parameters
    ----------
    flag : bool
        The value of the ``--debug`` option.
    env_var : str
        Name of the environment variable that also asks for tracebacks (unset, empty or ``"0"``: it does not).

    Returns
    -------
    bool
        Whether tracebacks should be printed.

    Examples
    --------
    >>> debug_requested(False, "RAPTOR_TEST_UNSET_VARIABLE")
    False
    >>> debug_requested(True, "RAPTOR_TEST_UNSET_VARIABLE")
    True
    """
    return bool(flag) or os.environ.get(env_var, "").strip() not in ("", "0")  # blank is off, like unset


def run_command(command, prog: str, *, debug: bool = False, interrupted: str = "interrupted") -> int:
    """Run ``command()`` (returns the exit code) under the convention above.

    Parameters
    ----------
    command : callable
        The command; its return value is the exit code.
    prog : str
        The program name printed before each message, e.g. ``"raptor probe"``.
    debug : bool
        Print the traceback of a ``ValueError`` / ``OSError`` too.
    interrupted : str
        What Ctrl-C prints after ``PROG: `` (say what was kept, e.g. the cache).

    Returns
    -------
    int
        The command's code, 2 after a ``ValueError`` / ``OSError``, 1 after a ``ConvergenceError``, 130 after Ctrl-C,
        143 after SIGTERM (received while the command runs in the main thread; the previous handler is restored
        afterwards).
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    try:
        return command()
    except (ValueError, OSError) as exc:
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except ConvergenceError as exc:
        if debug:
            traceback.print_exc()
        print(f"{prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)  # one line, whatever the message
        return 1
    except Terminated:
        print(f"{prog}: terminated (SIGTERM); {interrupted}", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return 130
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
