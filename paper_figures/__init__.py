"""paper_figures package."""
