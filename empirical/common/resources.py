"""The compute resources a call may use (the ground floor): cores, threads, joblib workers and torch devices, checked.

More threads than cores only slow a run down (and huge counts abort inside the OpenMP runtime), so a thread count
is bounded by :func:`available_cores`; a joblib worker count (:func:`check_n_jobs`) is not, since a backend such as
Dask may have more workers than local cores (the command lines bound theirs, :mod:`empirical.common.cli`).
:func:`resolve_device` is the one resolver of torch devices (the batched engine, model loading, the probe and the
command lines), and imports torch only when called.
"""
from __future__ import annotations

import os

from .checks import MAX_COUNT, check_int

__all__ = ["available_cores", "check_threads", "check_n_jobs", "resolve_device"]


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


def resolve_device(device, *, kinds=("cpu", "cuda")):
    """The one resolver of torch devices (the engine; model loading with ``kinds`` including ``"mps"``):
    ``"auto"`` (CUDA when available, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"`` or a :class:`torch.device`;
    ``ValueError`` naming ``device`` when it is malformed, of another kind, or not on this machine.

    Parameters
    ----------
    device : str or torch.device
        The device.
    kinds : tuple of str, default=("cpu", "cuda")
        Device types accepted (the engine computes in float64, which MPS does not have).

    Returns
    -------
    torch.device

    Examples
    --------
    >>> resolve_device("cpu")
    device(type='cpu')
    """
    import torch  # the floor loads torch only where a device is resolved

    if isinstance(device, str) and device.strip() == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ValueError(f"device must be a torch device such as 'auto', 'cpu', 'cuda' or 'cuda:1', got "
                         f"{device!r:.60} ({exc})") from None
    if dev.type not in kinds:
        raise ValueError(f"device must be one of the kinds {kinds}, got {device!r:.60}")
    available = {"cuda": torch.cuda.is_available, "mps": lambda: torch.backends.mps.is_available()}
    if dev.type in available and not available[dev.type]():
        raise ValueError(f"device {device!r} is not available on this machine (use 'cpu' or 'auto')")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} does not exist: this machine has {torch.cuda.device_count()} CUDA "
                         "device(s)")
    return dev
