"""The theory's domain is checked, and its answers respect their limits (issue "Guarantees as properties", section 4).

Grouped by pattern: domain checks (an input outside its measured domain is refused up front, naming the argument).
"""
import pytest

import cgmt
from cgmt.validation import KAPPA_MAX, check_kappa


# --------------------------------------------------------------------------------------------------------------
# domain checks
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kappa", [1e9, 1e14, 1e300])
def test_kappa_beyond_domain_is_refused_naming_kappa(kappa):
    # at kappa = 1e14 the solver used to return the kappa = 0 answer (accuracy 0.5) with success=True
    with pytest.raises(ValueError, match="kappa must lie in"):
        cgmt.solve(2.0, 0.1, kappa)


def test_kappa_domain_edge_is_accepted_and_at_the_noiseless_limit():
    assert check_kappa(KAPPA_MAX) == KAPPA_MAX
    edge = cgmt.solve(2.0, 0.1, KAPPA_MAX)
    inside = cgmt.solve(2.0, 0.1, 1e4)
    assert edge.success and inside.success
    assert abs(edge.accuracy - inside.accuracy) < 1e-5  # measured: 0.814671 from 1e4 to 1e9
