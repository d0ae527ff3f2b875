"""Names that ``sims`` renamed, kept readable for one release with a ``DeprecationWarning``.

``converged`` (a key of :func:`sims.measure_replicate` / :func:`sims.measure_spectral_replicate` and a column of
:func:`sims.compare_grid`) is now ``success``, the word every ``cgmt`` and ``sims`` result uses; the old name
warns and is removed in :data:`cgmt.result.REMOVAL_VERSION`.
"""
from __future__ import annotations

import pandas as pd

from empirical.common.deprecation import warn_deprecated

__all__ = ["RENAMED", "ReplicateRecord", "ResultTable"]

#: old name -> new name
RENAMED = {"converged": "success"}


class ReplicateRecord(dict):
    """A replicate's measurements (a ``dict``) in which the old keys of :data:`RENAMED` still read, with a warning.

    Examples
    --------
    >>> import warnings
    >>> rec = ReplicateRecord(success=True)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = rec["converged"]
    >>> old, caught[0].category.__name__, "converged" in rec
    (True, 'DeprecationWarning', False)
    """

    def __missing__(self, key):
        if key in RENAMED and RENAMED[key] in self:
            warn_deprecated(f"the sims key {key!r}", f"{RENAMED[key]!r}")
            return self[RENAMED[key]]
        raise KeyError(key)

    def get(self, key, default=None):
        return self[key] if key in self or (key in RENAMED and RENAMED[key] in self) else default


class ResultTable(pd.DataFrame):
    """A ``DataFrame`` in which the old columns of :data:`RENAMED` still read (``t["converged"]``,
    ``t.converged``), with a warning; derived frames keep the alias.

    Parameters
    ----------
    data, index, columns, dtype, copy
        As for :class:`pandas.DataFrame`.

    Examples
    --------
    >>> import warnings
    >>> t = ResultTable({"success": [True, False]})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     old = t["converged"].tolist()
    >>> old, caught[0].category.__name__
    ([True, False], 'DeprecationWarning')
    """

    @property
    def _constructor(self):
        return ResultTable

    def _renamed(self, key):
        if isinstance(key, str) and key in RENAMED and key not in self.columns and RENAMED[key] in self.columns:
            warn_deprecated(f"the sims column {key!r}", f"{RENAMED[key]!r}", stacklevel=4)
            return RENAMED[key]
        return key

    def __getitem__(self, key):
        return super().__getitem__(self._renamed(key))

    def __getattr__(self, name):
        if name in RENAMED:
            new = self._renamed(name)
            if new != name:
                return super().__getitem__(new)
        return super().__getattr__(name)
