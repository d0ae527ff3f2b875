"""``empirical.datasets`` is kept importable for existing code; the module lives in :mod:`empirical.llm.datasets`."""
from .llm.datasets import *  # noqa: F401,F403
from .llm.datasets import __all__  # noqa: F401
