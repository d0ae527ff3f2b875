"""``--publish DIR`` deletes or replaces only what a publication wrote there (issue G01), and touches the README only
from a complete run on an explicit ``--sync-readme`` (issue G02)."""
import json

import pytest
from test_results import _clean_run_record, _published_run

import paper_figures.__main__ as main_module
from paper_figures.publish import publish

MANIFEST = ".publication.json"  # the publication's list of what it wrote (paper_figures.publish.MANIFEST)

USER = b"my own notes, not the publication's\n"


def _user_files(target):
    """The user's files in the places a publication writes to (and in the earlier, flat layout)."""
    paths = [target / "figures" / "my_plot.png", target / "tables" / "my_table.csv", target / "run_info.json",
             target / "accuracy_differences.png", target / "notes.md"]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(USER)
    return paths


@pytest.fixture
def readme(tmp_path, monkeypatch):
    """A copy of the repository's README stands in for it (the real one is checked untouched too)."""
    real = main_module.Path(main_module.__file__).resolve().parent.parent / "README.md"
    before = real.read_bytes()
    copy = tmp_path / "README.md"
    copy.write_bytes(before)
    monkeypatch.setattr(main_module, "README", copy)
    yield copy
    assert real.read_bytes() == before


def test_publish_refuses_a_non_empty_folder_without_a_manifest(tmp_path, readme):
    run = _published_run(tmp_path)
    target = tmp_path / "docs"
    users = _user_files(target)
    with pytest.raises(ValueError, match=rf"refusing to publish into '{target}'.*no publication manifest"):
        publish(run, target)
    assert all(path.read_bytes() == USER for path in users)
    assert not (target / "claims.csv").exists() and not (target / MANIFEST).exists()
    # the command line: one error line naming the folder, exit 2, the user's files intact
    assert main_module.main(["--results-only", "--out", str(run), "--publish", str(target), "--no-progress"]) == 2
    assert all(path.read_bytes() == USER for path in users)


def test_a_republish_over_our_manifest_keeps_the_users_files_and_removes_only_ours(tmp_path, readme):
    run = _published_run(tmp_path)
    target = tmp_path / "docs"
    publish(run, target)
    listed = set(json.loads((target / MANIFEST).read_text())["files"])
    assert {"RESULTS.md", "claims.csv", "figures/accuracy_differences.png"} <= listed
    assert listed == {str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()} - {MANIFEST}
    users = [target / "figures" / "my_plot.png", target / "tables" / "my_table.csv", target / "run_info.json"]
    for path in users:
        path.write_bytes(USER)
    ours = target / "figures" / "dropped_figure.png"  # one an earlier publication wrote and this one does not
    ours.write_bytes(b"old figure")
    (target / MANIFEST).write_text(json.dumps({"format": "raptor-publication/1",
                                               "files": sorted(listed | {"figures/dropped_figure.png"})}))
    assert main_module.main(["--results-only", "--out", str(run), "--publish", str(target), "--no-progress"]) == 0
    assert all(path.read_bytes() == USER for path in users)  # the user's files survive
    assert not ours.exists()  # ours that this publication does not write go
    assert set(json.loads((target / MANIFEST).read_text())["files"]) == listed


def test_a_users_file_at_a_name_the_publication_writes_is_refused(tmp_path):
    run = _published_run(tmp_path)
    target = tmp_path / "docs"
    publish(run, target)
    manifest = json.loads((target / MANIFEST).read_text())
    manifest["files"].remove("figures/accuracy_differences.png")  # the file is now the user's
    (target / MANIFEST).write_text(json.dumps(manifest))
    (target / "figures" / "accuracy_differences.png").write_bytes(USER)
    with pytest.raises(ValueError, match=r"figures/accuracy_differences.png.*no earlier publication wrote it"):
        publish(run, target)
    assert (target / "figures" / "accuracy_differences.png").read_bytes() == USER


def test_an_empty_folder_is_published_into(tmp_path):
    run = _published_run(tmp_path)
    (tmp_path / "empty").mkdir()
    assert publish(run, tmp_path / "empty")


def test_a_partial_publication_leaves_the_readme_byte_identical(tmp_path, readme):
    """``--only theory --quick`` style: a run of one section, published to a new folder, without and with
    --sync-readme: the README keeps its bytes (before: its 42-row claims table became the run's 5 rows)."""
    before = readme.read_bytes()
    run = _published_run(tmp_path)  # its run record: one section (theory)
    assert main_module.main(["--results-only", "--out", str(run), "--publish", str(tmp_path / "new"),
                             "--no-progress"]) == 0
    assert (tmp_path / "new" / "claims.csv").is_file() and readme.read_bytes() == before
    assert main_module.main(["--results-only", "--out", str(run), "--publish", str(tmp_path / "new2"),
                             "--sync-readme", "--no-progress"]) == 2
    assert readme.read_bytes() == before and not (tmp_path / "new2").exists()  # refused before anything is written
    _clean_run_record(run, mode="quick", sections=list(main_module.DEFAULT_SECTIONS))
    assert main_module.main(["--results-only", "--out", str(run), "--publish", str(tmp_path / "new3"),
                             "--sync-readme", "--no-progress"]) == 2
    assert readme.read_bytes() == before


def test_a_complete_run_syncs_the_readme_only_on_request(tmp_path, readme):
    run = _published_run(tmp_path)
    _clean_run_record(run, sections=list(main_module.DEFAULT_SECTIONS))
    before = readme.read_bytes()
    assert main_module.main(["--results-only", "--out", str(run), "--publish", str(tmp_path / "a"),
                             "--no-progress"]) == 0
    assert readme.read_bytes() == before
    assert main_module.main(["--results-only", "--out", str(run), "--publish", str(tmp_path / "b"),
                             "--sync-readme", "--no-progress"]) == 0
    assert readme.read_bytes() != before and "<!-- claims-table:start -->" in readme.read_text()


def test_sync_readme_needs_publish_and_refuses_quick():
    with pytest.raises(SystemExit):
        main_module.main(["--sync-readme"])
