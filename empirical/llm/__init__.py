"""empirical.llm: from a transformers model to hidden-state matrices, and back by steering.

Modules (import them directly; torch is imported by those that need it):
:mod:`~empirical.llm.datasets` (concept datasets, checksums), :mod:`~empirical.llm.models` (loading,
GGUF conversion), :mod:`~empirical.llm.hooks` (decoder blocks, the layer convention),
:mod:`~empirical.llm.extract` (batched extraction), :mod:`~empirical.llm.cache` (the checksummed
hidden-state cache), :mod:`~empirical.llm.steering` (GCAV steering and generation).
This package imports :mod:`empirical.probes`, never the reverse.
"""
