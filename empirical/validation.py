"""Moved: the array and label checks to the ground floor, :mod:`empirical.common.arrays` (and the random-state
check and ``error_context`` to :mod:`empirical.common.checks`); the numerical helpers to :mod:`empirical.numerics`.
Importing a name from here warns ``DeprecationWarning`` (removed in 0.3).
"""
from empirical.common.deprecation import moved_names

__getattr__ = moved_names("empirical.validation", {
    **dict.fromkeys(("as_real_array", "check_vector", "check_matrix", "check_magnitude", "check_varying",
                     "check_binary_labels", "check_signed_labels", "check_grid", "check_min_per_class",
                     "MAX_MAGNITUDE", "MIN_MAGNITUDE", "C_MIN", "C_MAX", "TOL_MAX"), "empirical.common.arrays"),
    **dict.fromkeys(("check_random_state", "MAX_SEED", "error_context"), "empirical.common.checks"),
    **dict.fromkeys(("PAPER_SPLIT_SEED", "stratified_split", "safe_norm", "unit_vector", "standardize_stats"),
                    "empirical.numerics"),
})
