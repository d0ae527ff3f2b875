"""cgmt package."""
