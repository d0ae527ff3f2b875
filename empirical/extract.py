"""``empirical.extract`` is kept importable for existing code; the module lives in :mod:`empirical.llm.extract`.

Deprecated: importing it warns ``DeprecationWarning``; it is removed in 0.3.
"""
from empirical.common.deprecation import warn_deprecated

from .llm.extract import *  # noqa: F401,F403
from .llm.extract import __all__  # noqa: F401

warn_deprecated("the module empirical.extract", "empirical.llm.extract", stacklevel=2)
