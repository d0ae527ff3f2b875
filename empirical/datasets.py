"""``empirical.datasets`` is kept importable for existing code; the module lives in :mod:`empirical.llm.datasets`.

Deprecated: importing it warns ``DeprecationWarning``; it is removed in 0.3.
"""
from empirical.common.deprecation import warn_deprecated

from .llm.datasets import *  # noqa: F401,F403
from .llm.datasets import __all__  # noqa: F401

warn_deprecated("the module empirical.datasets", "empirical.llm.datasets", stacklevel=2)
