"""One write path (docs/errors_and_guarantees.md, "What survives interruption"): every package writes through
``empirical.common.files``; a write never replaces a device or FIFO; a multi-file artefact is written as one unit; a
partial run is never published over a complete one.  Grouped by pattern, named by subject."""
import os
import stat

import pytest

from cgmt.__main__ import main as cgmt_main
from empirical.common.files import atomic_write_text, check_write_target

SWEEP = ["sweep", "--deltas", "1", "--lams", "1", "--kappas", "1", "--no-progress"]


# --- one writer: cgmt's command line writes through empirical.common.files (ordinary permissions) ---------------

def test_cgmt_sweep_output_has_the_permissions_of_every_other_write(tmp_path, capsys):
    old = os.umask(0o022)
    try:
        assert cgmt_main([*SWEEP, "--out", str(tmp_path / "s.csv")]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "s.csv").stat().st_mode) == 0o644  # was mkstemp's 0o600


def test_cgmt_has_no_writer_of_its_own():
    import cgmt.__main__ as entry

    assert not hasattr(entry, "_atomic") and entry.atomic_path.__module__ == "empirical.common.files"


# --- W01: an existing target that is not a regular file is refused, never replaced ----------------------------------

def _fifo(tmp_path):
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_atomic_write_refuses_a_fifo_target(tmp_path):
    fifo = _fifo(tmp_path)
    with pytest.raises(ValueError, match=r"refusing to write .*pipe.*: it exists and is a FIFO, not a regular file"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_atomic_write_refuses_a_link_to_a_device(tmp_path):
    link = tmp_path / "null-link"
    link.symlink_to("/dev/null")
    with pytest.raises(ValueError, match="character device"):
        atomic_write_text(link, "x")
    assert link.is_symlink()


def test_check_write_target_accepts_new_and_regular_files(tmp_path):
    assert check_write_target(tmp_path / "new.csv") == tmp_path / "new.csv"
    assert check_write_target(atomic_write_text(tmp_path / "old.csv", "a")) == tmp_path / "old.csv"


def test_cgmt_sweep_refuses_a_device_out_before_the_work(tmp_path, capsys, monkeypatch):
    import cgmt.__main__ as entry

    monkeypatch.setattr(entry, "sweep", lambda *a, **k: pytest.fail("the sweep ran"))
    fifo = _fifo(tmp_path)
    assert cgmt_main([*SWEEP, "--out", str(fifo)]) == 2
    assert "is a FIFO, not a regular file" in capsys.readouterr().err and stat.S_ISFIFO(fifo.stat().st_mode)


def test_raptor_out_files_refuse_a_fifo_before_the_work(tmp_path):
    import argparse

    from empirical import cli

    os.mkfifo(tmp_path / "probe_summary.csv")
    with pytest.raises(ValueError, match="probe_summary.csv.*FIFO"):
        cli._out(argparse.Namespace(out=str(tmp_path)), ["probe_summary.csv"])


# --- W03: a concept-vector pair (.safetensors + .json) is written as one unit ----------------------------------------

def _vectors(seed, model="tiny-a"):
    import numpy as np

    from empirical import ConceptVectors, LinearProbe

    rng = np.random.default_rng(seed)
    return ConceptVectors({2: LinearProbe(rng.standard_normal(5), 0.1)}, method="raptor", model=model)


def _failing_replace(monkeypatch, fail_on: str):
    """Make ``os.replace`` (as empirical.common.files calls it) fail when it renames onto a target ending in
    ``fail_on``."""
    import empirical.common.files as files

    real = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst).endswith(fail_on):
            raise OSError(28, "No space left on device")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(files.os, "replace", replace)


def test_concept_vector_pair_survives_a_failure_between_its_two_renames(tmp_path, monkeypatch):
    import numpy as np

    from empirical import load_concept_vectors, save_concept_vectors

    save_concept_vectors(tmp_path / "cv", _vectors(0))
    _failing_replace(monkeypatch, "cv.json")  # the array file is replaced, then the metadata rename fails
    with pytest.raises(OSError, match="while writing .*cv.json"):
        save_concept_vectors(tmp_path / "cv", _vectors(1, model="tiny-b"))
    monkeypatch.undo()
    with pytest.warns(UserWarning, match="interrupted .* loaded the previous complete pair"):
        back = load_concept_vectors(tmp_path / "cv")
    assert back.model == "tiny-a" and np.array_equal(back[2].coef, _vectors(0)[2].coef)
    save_concept_vectors(tmp_path / "cv", _vectors(1, model="tiny-b"))  # the next save completes and tidies up
    assert load_concept_vectors(tmp_path / "cv").model == "tiny-b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cv.json", "cv.safetensors"]


def test_concept_vector_pair_survives_a_failure_writing_the_array_file(tmp_path, monkeypatch):
    from empirical import load_concept_vectors, save_concept_vectors

    save_concept_vectors(tmp_path / "cv", _vectors(0))
    _failing_replace(monkeypatch, "cv.safetensors")
    with pytest.raises(OSError):
        save_concept_vectors(tmp_path / "cv", _vectors(1, model="tiny-b"))
    monkeypatch.undo()
    assert load_concept_vectors(tmp_path / "cv").model == "tiny-a"


def test_probe_pair_is_written_without_leftovers(tmp_path):
    import numpy as np

    from empirical import RaptorProbe, load_probe, save_probe

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 4)), np.repeat([0, 1], 20)
    X[:, 0] += y
    probe = RaptorProbe(Cs=[0.1, 1.0]).fit(X, y)
    save_probe(tmp_path / "p", probe)
    save_probe(tmp_path / "p", probe)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.safetensors"]
    np.testing.assert_allclose(load_probe(tmp_path / "p").decision_function(X), probe.decision_function(X))


# --- F01/F02: a partial or empty run is never published over complete results; --results-only needs tables ----------

def _published(tmp_path):
    import shutil
    from pathlib import Path

    target = tmp_path / "published"
    target.mkdir()
    shutil.copy(Path(__file__).resolve().parents[1] / "docs" / "results" / "claims.csv", target / "claims.csv")
    (target / "RESULTS.md").write_text("complete results\n")
    from paper_figures.publish import write_manifest

    write_manifest(target, ["claims.csv", "RESULTS.md"])  # as an earlier publication leaves it
    return target


def _empty_run(tmp_path):
    from paper_figures import output

    out = tmp_path / "run"
    (out / "tables").mkdir(parents=True)
    (out / "RESULTS.md").write_text("# results\n")
    # a run record of one clean commit, so that only the partial-run rule decides
    output.save_json(dict(mode="full", sections=["theory"], status="complete", git_commit="a" * 40, git_dirty=False,
                          earlier_invocations=[]), out, "run_info")
    return out


def test_publish_refuses_an_empty_run_over_published_claims(tmp_path):
    from paper_figures.publish import publish

    target = _published(tmp_path)
    before = {p.name: p.read_bytes() for p in target.iterdir()}
    with pytest.raises(ValueError, match=r"refusing to publish over .*claims.csv.* leaves \d+ of them untested.*"
                                         r"--allow-partial"):
        publish(_empty_run(tmp_path), target)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before


def test_publish_allow_partial_replaces_published_claims(tmp_path):
    from paper_figures.publish import publish

    target = _published(tmp_path)
    run = _empty_run(tmp_path)
    publish(run, target, allow_partial=True)
    assert (target / "RESULTS.md").read_text() == (run / "RESULTS.md").read_text() != "complete results\n"


def test_publish_into_a_new_folder_needs_no_flag(tmp_path):
    from paper_figures.publish import publish

    publish(_empty_run(tmp_path), tmp_path / "fresh")
    assert (tmp_path / "fresh" / "claims.csv").is_file()


def test_results_only_without_tables_is_an_error_naming_the_folder(tmp_path, capsys):
    from paper_figures.__main__ import main

    out = tmp_path / "empty"
    assert main(["--out", str(out), "--results-only", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "holds no tables" in err and str(out / "tables") in err
    assert not (out / "RESULTS.md").exists()


@pytest.mark.parametrize("fmt", ["safetensors", "gguf"])
def test_raptor_export_refuses_a_fifo_out(tmp_path, capsys, fmt):
    if fmt == "gguf":
        pytest.importorskip("gguf")
    from empirical import cli, save_concept_vectors

    save_concept_vectors(tmp_path / "cv", _vectors(0))
    fifo = _fifo(tmp_path)
    assert cli.main(["export", "--probe-file", str(tmp_path / "cv.json"), "--format", fmt, "--out", str(fifo)]) == 2
    assert "is a FIFO, not a regular file" in capsys.readouterr().err and stat.S_ISFIFO(fifo.stat().st_mode)
