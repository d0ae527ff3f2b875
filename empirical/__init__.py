"""empirical package."""
