"""``empirical.models`` is kept importable for existing code; the module lives in :mod:`empirical.llm.models`.

Deprecated: importing it warns ``DeprecationWarning``; it is removed in 0.3.
"""
from empirical.common.deprecation import warn_deprecated

from .llm.models import *  # noqa: F401,F403
from .llm.models import __all__  # noqa: F401

warn_deprecated("the module empirical.models", "empirical.llm.models", stacklevel=2)
