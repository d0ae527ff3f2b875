"""Moved to the ground floor: :mod:`empirical.common.cli_errors` (importing a name from here warns
``DeprecationWarning``, removed in 0.3)."""
from empirical.common.deprecation import moved_names

__getattr__ = moved_names("cgmt.cli_errors", dict.fromkeys(("debug_requested", "run_command"),
                                                             "empirical.common.cli_errors"))
