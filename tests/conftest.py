"""Shared pytest configuration.

Hypothesis profiles: ``ci`` (derandomized, bounded examples, no deadline) is loaded when the
environment variable ``CI`` is set or ``HYPOTHESIS_PROFILE=ci``; ``dev`` otherwise.
"""
import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=50,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
