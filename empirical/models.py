"""``empirical.models`` is kept importable for existing code; the module lives in :mod:`empirical.llm.models`."""
from .llm.models import *  # noqa: F401,F403
from .llm.models import __all__  # noqa: F401
