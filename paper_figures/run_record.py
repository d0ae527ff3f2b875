"""The run record, ``OUT/tables/run_info.json``: one entry per invocation of ``python -m paper_figures`` on a folder.

The latest invocation is the record's top level and the ones before it are its ``earlier_invocations``, oldest
first (:func:`invocations`).  Each entry says what ran (mode, sections, workers, git commit and state) and for how
long, and since issue 53 when: ``started_utc`` (the invocation's start), ``ended_utc`` (its end; ``null`` while it
runs and for one that was interrupted) and ``recorded_utc`` (its last save, the latest moment it is known to have
run), UTC, ISO 8601 to the second (:data:`TIMESTAMP_FORMAT`).  Two invocations on one folder must not overlap: the
second would read tables the first is still writing and their timings would share the cores.
:func:`overlapping_invocations` finds the pairs that did, from the stamps; a publication refuses such a run
(:func:`paper_figures.publish.publish`) and RESULTS.md's run lines flag them.  Entries recorded before the stamps
existed carry none and are not checked.

What the stamps cannot show: two invocations that start together each rewrite the whole record, so the one that
saves last can drop the other's entry; the stamps check the entries that are there.
"""
from __future__ import annotations

from datetime import datetime, timezone

#: The format of the run record's timestamps (UTC, to the second: ``2026-11-29T11:17:20Z``).
TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now() -> str:
    """The current wall-clock time, UTC, as a run-record stamp.

    Returns
    -------
    str
        The time in :data:`TIMESTAMP_FORMAT` (ISO 8601, to the whole second, truncated, ``Z`` suffix):
        ``"2026-11-29T11:17:20Z"``.
    """
    return datetime.now(timezone.utc).strftime(TIMESTAMP_FORMAT)


def invocations(info: dict) -> list:
    """Every invocation a run record lists, oldest first (empty for an empty record).

    Parameters
    ----------
    info : dict
        The run record (``tables/run_info.json``): the latest invocation's entry at the top level, the earlier ones
        under ``earlier_invocations``, oldest first; empty (or None) when nothing has run.

    Returns
    -------
    list of dict
        The ``earlier_invocations`` entries in their order, then the latest invocation (the top level without its
        ``earlier_invocations`` key); position ``i`` (0-based) is invocation ``i + 1`` of the messages.
    """
    if not info:
        return []
    return [*info.get("earlier_invocations", []), {k: v for k, v in info.items() if k != "earlier_invocations"}]


def _stamp(run: dict, key: str, number: int):
    value = run.get(key)
    if value is None:
        return None
    try:
        return datetime.strptime(str(value), TIMESTAMP_FORMAT)
    except ValueError:
        raise ValueError(f"run record: invocation {number}'s {key} is {value!r}, not a UTC time like "
                         f"{utc_now()!r}") from None


def invocation_span(run: dict, number: int = 1) -> tuple | None:
    """When one invocation ran: ``(start, end)`` as datetimes, the end being ``ended_utc``, else ``recorded_utc``
    (an interrupted or running invocation: its last save, a lower bound of its end); None for an entry without
    ``started_utc`` (recorded before the stamps).

    Parameters
    ----------
    run : dict
        One entry of :func:`invocations`.
    number : int, default=1
        Its position (1 = oldest), for the messages.

    Returns
    -------
    tuple of (datetime.datetime, datetime.datetime) or None
        ``(start, end)``, naive datetimes in UTC to the second, ``end >= start`` (an entry with neither
        ``ended_utc`` nor ``recorded_utc`` ends at its start); None when the entry has no ``started_utc``.

    Raises
    ------
    ValueError
        A stamp that is not in :data:`TIMESTAMP_FORMAT`, or an end before the start, naming the invocation.
    """
    start = _stamp(run, "started_utc", number)
    if start is None:
        return None
    end = _stamp(run, "ended_utc", number) or _stamp(run, "recorded_utc", number) or start
    if end < start:
        raise ValueError(f"run record: invocation {number} ends ({end:{TIMESTAMP_FORMAT}}) before it starts "
                         f"({start:{TIMESTAMP_FORMAT}})")
    return start, end


def overlapping_invocations(info: dict) -> list:
    """The invocations of a run record that ran at the same time as one recorded before them.

    Each stamped invocation is compared with the stamped one before it in the record that ended last: it overlaps
    when it started before that end (:func:`invocation_span`).  Without an overlap the starts and ends alternate in
    the record's order, so no two invocations ran at once.

    Parameters
    ----------
    info : dict
        The run record (``tables/run_info.json``).

    Returns
    -------
    list of (int, int, str)
        ``(earlier, later, words)`` per overlap: the two invocations' positions (1 = oldest) and their spans.
    """
    found, previous = [], None
    for number, run in enumerate(invocations(info), start=1):
        span = invocation_span(run, number)
        if span is None:
            continue
        if previous is not None and span[0] < previous[1][1]:
            (before, (start, end)) = previous
            found.append((before, number, f"invocation {number} started at {span[0]:{TIMESTAMP_FORMAT}}, before "
                                           f"invocation {before} ({start:{TIMESTAMP_FORMAT}} to "
                                           f"{end:{TIMESTAMP_FORMAT}}) ended"))
        if previous is None or span[1] > previous[1][1]:
            previous = (number, span)
    return found
