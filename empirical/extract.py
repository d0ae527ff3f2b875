"""``empirical.extract`` is kept importable for existing code; the module lives in :mod:`empirical.llm.extract`."""
from .llm.extract import *  # noqa: F401,F403
from .llm.extract import __all__  # noqa: F401
