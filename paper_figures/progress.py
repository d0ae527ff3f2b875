"""One progress display for the whole ``paper_figures`` run: steps done, current step, elapsed, ETA.

Every section announces its steps with :meth:`RunProgress.step`; each step carries a weight, its
expected cost in seconds on two CPU cores (measured on the default model, see ``docs/results.md``), so
the bar's ETA is meaningful although steps differ by orders of magnitude.  A step that is resumed
from a saved table (or a cache) finishes at once and is taken out of the total, so the ETA counts only
the work still to do.  Inner progress bars (libraries, joblib,
transformers) are kept off so that this is the only display; ``enabled=False`` shows nothing.
"""
from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager

from tqdm.auto import tqdm


class RunProgress:
    """Weighted step counter shown as one tqdm bar.

    Parameters
    ----------
    total : float
        Sum of the weights (expected seconds) of the steps the run will announce.
    enabled : bool
        Show the bar (False: silent; the steps still run and are timed).
    refresh_seconds : float
        How often the elapsed time and ETA are redrawn while a long step runs.
    on_step : callable, optional
        Called with no argument when a step starts, when it finishes and when it is interrupted (the run record is
        saved there, so that an invocation killed midway keeps the timings of the steps it finished and names the
        step it was in).

    Attributes
    ----------
    timings : dict
        Measured seconds per finished step name (an interrupted step is not here: its time covers part of its work).
    current : str or None
        The step in progress.
    unfinished : dict or None
        ``{"name", "seconds"}`` of a step that an exception (Ctrl-C included) ended before it finished.
    """

    #: a step shorter than this (seconds) that was expected to take 10x longer counts as resumed
    instant_seconds = 2.0

    def __init__(self, total: float, enabled: bool = True, refresh_seconds: float = 1.0, on_step=None):
        self.enabled = bool(enabled)
        self._on_step = on_step
        self.timings: dict = {}
        self.current = None
        self.unfinished = None
        self._done_steps = 0
        self._total = max(float(total), 1e-9)  # kept here too: a disabled tqdm bar does not count
        self._done = 0.0
        self._bar = tqdm(total=max(float(total), 1e-9), disable=not self.enabled, unit="s(est)",
                         bar_format="{desc} {percentage:3.0f}%|{bar:20}| elapsed {elapsed}, ETA {remaining}",
                         dynamic_ncols=True)
        self._stop = threading.Event()
        self._ticker = None
        if self.enabled:
            self._ticker = threading.Thread(target=self._tick, args=(refresh_seconds,), daemon=True)
            self._ticker.start()

    def _tick(self, every):
        while not self._stop.wait(every):
            self._bar.refresh()

    @contextmanager
    def step(self, name: str, weight: float = 1.0):
        """Run one step: shows ``name`` as the current step, then advances the bar by ``weight``."""
        self._bar.set_description_str(f"{self._done_steps} steps done | now: {name} |", refresh=True)
        self.current = name
        if self._on_step is not None:
            self._on_step()
        t0 = time.perf_counter()
        try:
            yield self
        except BaseException:
            self.current, self.unfinished = None, {"name": name, "seconds": round(time.perf_counter() - t0, 1)}
            if self._on_step is not None:
                self._on_step()
            raise
        else:
            seconds = time.perf_counter() - t0
            self.current = None
            self.timings[name] = seconds
            self._done_steps += 1
            if seconds < self.instant_seconds and weight > 10 * seconds:
                # resumed from a saved table or a cache: no work done, so it leaves the total instead of
                # advancing the bar (the ETA then counts only work still to do)
                self._total = max(self._total - float(weight), self._done + 1e-9)
                self._bar.total = self._total
                self._bar.refresh()
            else:
                step = min(float(weight), self._total - self._done)
                self._done += step
                self._bar.update(step)
            if self._on_step is not None:
                self._on_step()

    @property
    def total(self) -> float:
        """Expected seconds of the work announced so far plus still to come (resumed steps removed)."""
        return self._total

    @property
    def done(self) -> float:
        """Expected seconds of the steps that did their work."""
        return self._done

    def write(self, message: str) -> None:
        """Print a line above the bar (or plainly when the bar is off)."""
        if self.enabled:
            self._bar.write(message)

    def close(self) -> None:
        """Stop the display."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        self._bar.close()


def silence_libraries() -> None:
    """Turn off the progress bars and info logging of transformers / huggingface_hub (weights loading
    bars leaked through ``--no-progress`` before), so that :class:`RunProgress` is the only display."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # the LLM extra is optional
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
