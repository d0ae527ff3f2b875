"""empirical.llm: from a transformers model to hidden-state matrices, and back by steering.

Modules (import them directly; torch is imported by those that need it):
:mod:`~empirical.llm.datasets` (concept datasets, checksums), :mod:`~empirical.llm.models` (loading,
GGUF conversion), :mod:`~empirical.llm.hooks` (decoder blocks, the layer convention),
:mod:`~empirical.llm.extract` (batched extraction), :mod:`~empirical.llm.cache` (the checksummed
hidden-state cache); steering, split by job: :mod:`~empirical.llm.gcav` (GCAV's rules, no torch),
:mod:`~empirical.llm.edits` (additive and GCAV edits),
:mod:`~empirical.llm.prompts`, :mod:`~empirical.llm.generation`, :mod:`~empirical.llm.steering` (the paper's
measurement in probe coordinates), :mod:`~empirical.llm.answer_readout`, :mod:`~empirical.llm.steering_settings`,
:mod:`~empirical.llm.steering_eval` (what the model says), :mod:`~empirical.llm.steering_protocol` (its constants and
gates), :mod:`~empirical.llm.steering_selection`, :mod:`~empirical.llm.steering_cost` (the last three without torch).
This package imports :mod:`empirical.probes`, never the reverse.
"""
