"""Every relative link of the README and docs/ points at a committed file (a link to a table or figure that a
publication removed, or to a moved record, is a claim a reader cannot check)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: [text](target) and ![alt](target); the target ends at whitespace or ')' (a title after a space is ignored)
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)")
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def _relative_targets(text: str) -> list:
    targets = []
    for target in _LINK.findall(re.sub(r"```.*?```", "", text, flags=re.S)):  # code blocks are not links
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):  # URLs, mail, in-page anchors
            continue
        targets.append(target.split("#", 1)[0])
    return targets


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_committed_files(document):
    broken = [target for target in _relative_targets(document.read_text())
              if not (document.parent / target).exists()]
    assert not broken, f"{document.relative_to(ROOT)} links to missing files: {broken}"
