"""The dataset type: :class:`ConceptDataset` (texts, 0/1 labels, the prompt template) and the per-class cap rule."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

#: Placeholder that a template replaces with the example text.
PLACEHOLDER = "{text}"


@dataclass
class ConceptDataset:
    """A binary concept dataset. ``labels[i]`` is 1 when ``texts[i]`` shows the concept.

    Parameters
    ----------
    name : str
        The dataset's name (table names, the cache entry's label).
    texts : list of str
        The examples, without the template.
    labels : array of 0/1
        1 when the example shows the concept (the positive class of every probe).
    template : str, default="{text}"
        Prompt template containing ``{text}``.
    files : dict, optional
        Source file name -> sha256.
    max_per_class : int, optional
        The cap the dataset was loaded with.
    groups : array of shape (n,), optional
        A grouping key per example whose rows must stay on one side of a split (Counterfact: the subject,
        stated once truly and once falsely; :func:`empirical.probes.grouped_split`); None when examples are
        independent.

    Examples
    --------
    >>> ds = ConceptDataset("toy", ["yes", "no"], [1, 0], "Q: {text}")
    >>> ds.prompts, len(ds)
    (['Q: yes', 'Q: no'], 2)
    """

    name: str
    texts: list
    labels: np.ndarray
    template: str = PLACEHOLDER
    files: dict = field(default_factory=dict)  # file name -> sha256
    max_per_class: int | None = None
    groups: np.ndarray | None = None

    def __post_init__(self):
        if isinstance(self.texts, (str, bytes)) or not hasattr(self.texts, "__len__"):
            raise ValueError(f"dataset {self.name!r}: texts must be a list of str (one per example), got "
                             f"{type(self.texts).__name__} {self.texts!r:.40}")
        bad = next(((i, t) for i, t in enumerate(self.texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise ValueError(f"dataset {self.name!r}: texts must be str (the examples the template is applied to), "
                             f"got {bad[1]!r:.40} ({type(bad[1]).__name__}) at index {bad[0]}")
        labels = np.asarray(self.labels)
        if labels.ndim != 1:
            raise ValueError(f"dataset {self.name!r}: labels must be a 1-D sequence of 0/1 (1 = concept present), got "
                             f"shape {labels.shape}: {labels.ravel()[:5].tolist()!r:.60}")
        numeric = labels.dtype.kind in "biuf"
        if labels.size and (not numeric or not np.all(np.isin(labels, (0, 1)))):
            values = labels.ravel()
            offending = values if not numeric else values[~np.isin(values, (0, 1))]
            shown = ", ".join(repr(v) for v in dict.fromkeys(offending.tolist()))  # distinct, in order
            raise ValueError(f"dataset {self.name!r}: labels must be 0/1 numbers or booleans (1 = concept present), "
                             f"got {shown:.120}")
        self.labels = labels.astype(np.int64)
        if len(self.texts) != len(self.labels):
            raise ValueError(f"texts and labels differ in length ({len(self.texts)} vs {len(self.labels)})")
        if PLACEHOLDER not in self.template:
            raise ValueError(f"template must contain {PLACEHOLDER!r}, got {self.template!r}")
        if self.groups is not None:
            self.groups = np.asarray(self.groups)
            if self.groups.shape != self.labels.shape:
                raise ValueError(f"dataset {self.name!r}: groups must have one entry per example "
                                 f"({self.labels.shape}), got shape {self.groups.shape}")

    @property
    def prompts(self) -> list:
        """Texts with the template applied (what the model reads)."""
        return [apply_template(self.template, t) for t in self.texts]

    def __len__(self) -> int:
        return len(self.texts)

    def class_counts(self) -> dict:
        return {int(k): int(v) for k, v in zip(*np.unique(self.labels, return_counts=True))}

    def fingerprint(self) -> str:
        """sha256 over the name, file hashes, template and the selected rows (texts and labels)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.name, sorted(self.files.items()), self.template]).encode())
        for t, y in zip(self.texts, self.labels):
            h.update(f"{int(y)}\t{t}\n".encode())
        return h.hexdigest()


def apply_template(template: str, text: str) -> str:
    """Replace ``{text}`` in ``template`` by ``text`` (no other brace is interpreted)."""
    return template.replace(PLACEHOLDER, text)


def _cap_index(labels, cap) -> np.ndarray:
    """Rows kept by a per-class cap: the first ``cap`` of each class in file order (all rows for None)."""
    labels = np.asarray(labels, dtype=np.int64)
    if cap is None:
        return np.arange(len(labels))
    keep = np.zeros(len(labels), dtype=bool)
    for c in (0, 1):
        keep[np.flatnonzero(labels == c)[:cap]] = True
    return np.flatnonzero(keep)


def _cap_per_class(texts, labels, cap):
    idx = _cap_index(labels, cap)
    return [texts[i] for i in idx], np.asarray(labels, dtype=np.int64)[idx]


def _resolve_cap(max_per_class, reference_cap=None, *, registered: bool = False):
    """The per-class cap: ``"reference"`` (the registered dataset's ``reference_cap``), None (every row) or a
    positive int; ValueError naming ``max_per_class`` otherwise."""
    if isinstance(max_per_class, str):
        if max_per_class != "reference" or not registered:
            raise ValueError(f"max_per_class must be 'reference', None or a positive int, got {max_per_class!r}")
        return reference_cap
    if max_per_class is None:
        return None
    if isinstance(max_per_class, bool) or not isinstance(max_per_class, (int, np.integer)) or max_per_class < 1:
        raise ValueError(f"max_per_class must be 'reference', None or a positive int, got {max_per_class!r}")
    return int(max_per_class)


def _check_two_classes(name, labels):
    classes = np.unique(labels)
    if len(classes) < 2:
        raise ValueError(f"dataset {name!r} has a single class {classes.tolist()}; a probe needs both 0 and 1")
