"""Moved to the ground floor: :mod:`empirical.common.cli_args` (importing a name from here warns
``DeprecationWarning``, removed in 0.3)."""
from empirical.common.deprecation import moved_names

__getattr__ = moved_names("cgmt.cli_args", dict.fromkeys(
    ("add_version", "available_cores", "enforce_options", "int_in", "number_in", "number_list", "nonempty_path",
     "program_version", "subparser", "worker_count"), "empirical.common.cli_args"))
