"""The one timing helper the benchmark scripts share (run them as ``python benchmarks/<name>.py``)."""
from __future__ import annotations

import statistics
import time


def median_time(fn, repeats: int):
    """Median wall-clock seconds of ``repeats`` calls of ``fn()``, and the last call's result."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out
