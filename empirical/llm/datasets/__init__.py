"""Concept datasets: the registry of named datasets (the seven benchmark sets), and a generic table loader.

Every loader returns a :class:`ConceptDataset`: ``texts`` (raw examples), ``labels`` (0/1 ints,
1 = the concept is present), ``template`` (the prompt template, ``{text}`` marks where the example
goes) and ``prompts`` (the texts with the template applied; this is what the model reads, its last
token's hidden state is what gets probed).

Data directory, in order of precedence: the ``data_dir`` argument, the ``RAPTOR_DATA`` environment
variable, then ``../shared/datasets`` relative to the repository or to the working directory.
The files are published research data (see ``docs/llm.md`` for where to get them); they are
verified against ``SHA256SUMS`` in the data directory when present, otherwise against the
checksums of the reference copies recorded in the registry (``_shipped``).

Per-class caps: by default a loader keeps, for each class, the first examples in file order up to
the cap the Concept-Depth reference benchmark used (each dataset's ``reference_cap``; ``None`` = all rows).
``max_per_class=None`` keeps everything, an int caps both classes at that many (``--quick``).

The package is split by job: ``_concept`` (the dataset type), ``_registry`` (the registry, checksums and
:func:`load`), ``_shipped`` (the readers of the seven benchmark files and their entries), ``_table`` (the generic
table loader) and ``_files`` (the data directory and the one safe reader of its files).  The names below are the
API; the underscored modules are not.
"""
from __future__ import annotations

from . import _shipped  # noqa: F401 - registers the seven benchmark datasets
from ._concept import ConceptDataset
from ._files import resolve_data_dir
from ._registry import DatasetSpec, answer_pairs, dataset_names, get_dataset, load, register_dataset, unregister_dataset
from ._table import load_table

__all__ = [
    "ConceptDataset",
    "DatasetSpec",
    "register_dataset",
    "unregister_dataset",
    "get_dataset",
    "dataset_names",
    "answer_pairs",
    "resolve_data_dir",
    "load",
    "load_table",
]
