"""The CPU resources a call may use (the ground floor): cores, threads and joblib workers, checked.

More threads than cores only slow a run down (and huge counts abort inside the OpenMP runtime), so a thread count
is bounded by :func:`available_cores`; a joblib worker count (:func:`check_n_jobs`) is not, since a backend such as
Dask may have more workers than local cores (the command lines bound theirs, :mod:`empirical.common.cli`).
"""
from __future__ import annotations

import os

from .checks import MAX_COUNT, check_int

__all__ = ["available_cores", "check_threads", "check_n_jobs"]


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the platform has one).

    Returns
    -------
    int
        The number of cores in the affinity mask, else ``os.cpu_count()`` (1 if unknown).

    Examples
    --------
    >>> available_cores() >= 1
    True
    """
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def check_threads(value, name: str = "num_threads") -> int:
    """A thread count of this process: an integer in ``[1, available_cores()]`` (more threads than cores only
    slow a run down, and huge counts abort inside the OpenMP runtime).  Worker counts ``n_jobs`` of joblib are
    not bounded here (a backend such as Dask may have more workers than local cores); the command lines bound
    theirs (:mod:`empirical.common.cli_args`).

    Parameters
    ----------
    value : int or integral float
        The thread count to check.
    name : str, default="num_threads"
        The argument's name, used in the message.

    Returns
    -------
    int
        ``int(value)``.

    Raises
    ------
    ValueError
        Not an integer >= 1, or more than :func:`available_cores`.

    Examples
    --------
    >>> check_threads(1)
    1
    >>> check_threads(2.5)
    Traceback (most recent call last):
    ...
    ValueError: num_threads must be an integer >= 1, got 2.5
    """
    value = check_int(value, name)
    if value > available_cores():
        raise ValueError(f"{name} must be at most the {available_cores()} CPU cores available, got {value}")
    return value


def check_n_jobs(value, name: str = "n_jobs") -> int:
    """A joblib worker count: a non-zero integer with ``|value| <=`` :data:`MAX_COUNT` (``-1``: every core,
    ``-2``: all but one, as in joblib and scikit-learn).  Counts above the local cores are allowed (a backend
    such as Dask may have more workers); the command lines bound theirs (:mod:`empirical.common.cli_args`).

    Parameters
    ----------
    value : int or integral float
        The worker count to check.
    name : str, default="n_jobs"
        The argument's name, used in the message.

    Returns
    -------
    int
        ``int(value)``.

    Raises
    ------
    ValueError
        Not an integer, zero, or beyond ``MAX_COUNT`` in size.

    Examples
    --------
    >>> check_n_jobs(-1)
    -1
    >>> check_n_jobs(0)
    Traceback (most recent call last):
    ...
    ValueError: n_jobs must be a non-zero integer (-1: every core), got 0
    """
    count = check_int(value, name, minimum=-MAX_COUNT)
    if count == 0:
        raise ValueError(f"{name} must be a non-zero integer (-1: every core), got {value!r}")
    return count
