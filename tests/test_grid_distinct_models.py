"""A grid is made of distinct models (issue 52, section 5, G05): ``python -m paper_figures --models`` identifies a model
by what it is (the extraction cache's identity of the folder a name resolves to), not by its spelling, and refuses two
entries that are one model before anything runs, naming ``--models`` and both entries; two different models never
share an output folder, and a folder collision is never reported as something else.

Before: ``--models smollm2 SmolLM2`` and a folder next to its copy ran as two models (the grid's claims then counted
each setting of one model twice); a folder given as ``m`` and ``m/`` (or through a symbolic link) was refused as
"must name at least two distinct models"; two different hub ids ``org/a`` and ``org_a`` were refused the same way
(their folder names collided)."""
import os
import shutil

import pytest

from paper_figures import empirical_figures, grid
from paper_figures.__main__ import main

pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical.llm import _models as M  # noqa: E402 -- after the skip: needs the [llm] extra
from empirical.testing import tiny_model, tiny_tokenizer  # noqa: E402


def _save(folder, seed=1):
    tiny_model("llama", seed=seed, n_layers=2).save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture
def nothing_runs(tmp_path, monkeypatch):
    """A sandboxed cache; any model section that starts is a failure (the refusal comes before any work)."""
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # nothing may try to download the default model

    def ran(*args, **kwargs):
        raise AssertionError("a model section ran")

    monkeypatch.setattr(empirical_figures, "run", ran)
    monkeypatch.setattr(grid, "run", ran)


def _refused(tmp_path, capsys, models):
    """Exit code and stderr of ``--models`` on ``models`` (the empirical section only)."""
    argv = ["--out", str(tmp_path / "out"), "--only", "empirical", "--quick", "--no-progress", "--models", *models]
    code = main(argv)
    return code, capsys.readouterr().err


def _one_model(err, a, b):
    return "--models" in err and repr(a) in err and repr(b) in err and "same model" in err


def test_one_name_in_two_cases_is_one_model(tmp_path, capsys, nothing_runs):
    code, err = _refused(tmp_path, capsys, ["smollm2", "SmolLM2"])
    assert code == 2 and _one_model(err, "smollm2", "SmolLM2"), err
    code, err = _refused(tmp_path, capsys, ["SmolLM2-135M-Instruct", "smollm2"])
    assert code == 2 and _one_model(err, "SmolLM2-135M-Instruct", "smollm2"), err


@pytest.mark.parametrize("spelling", ["copy", "symlink", "trailing slash", "relative"])
def test_two_spellings_or_copies_of_one_folder_are_one_model(tmp_path, capsys, monkeypatch, nothing_runs, spelling):
    folder = _save(tmp_path / "m")
    if spelling == "copy":
        other = str(shutil.copytree(folder, tmp_path / "elsewhere" / "copy"))
    elif spelling == "symlink":
        (tmp_path / "link").symlink_to(folder, target_is_directory=True)
        other = str(tmp_path / "link")
    elif spelling == "trailing slash":
        other = str(folder) + os.sep
    else:
        monkeypatch.chdir(tmp_path)
        other = "m"
    code, err = _refused(tmp_path, capsys, [str(folder), other])
    assert code == 2 and _one_model(err, str(folder), other), err
    assert not (tmp_path / "out" / "models").exists()


def test_the_default_model_and_its_converted_folder_are_one_model(tmp_path, capsys, nothing_runs):
    # where load_model("smollm2") finds its converted copy
    converted = _save(tmp_path / "cache" / "models" / f"{M.SMOLLM2['name']}-{M.SMOLLM2['version']}")
    (converted / "raptor_model.json").write_text('{"gguf_sha256": "0"}')
    copy = str(shutil.copytree(converted, tmp_path / "my-smollm2"))
    code, err = _refused(tmp_path, capsys, ["smollm2", copy])
    assert code == 2 and _one_model(err, "smollm2", copy), err


def test_a_hub_id_and_a_copy_of_its_snapshot_are_one_model(tmp_path, capsys, monkeypatch, nothing_runs):
    from huggingface_hub import constants

    repo = tmp_path / "hub" / "models--org--tiny"
    _save(repo / "snapshots" / ("a" * 40))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    copy = str(shutil.copytree(repo / "snapshots" / ("a" * 40), tmp_path / "tiny"))
    code, err = _refused(tmp_path, capsys, ["org/tiny", copy])
    assert code == 2 and _one_model(err, "org/tiny", copy), err


def test_different_models_pass_and_keep_their_folders(tmp_path, monkeypatch, nothing_runs):
    a, b = _save(tmp_path / "a" / "model", seed=1), _save(tmp_path / "b" / "model", seed=2)
    assert grid.check_models([str(a), str(b)]) == [str(a), str(b)]
    assert M.source_identity(str(a)) == M.load_model(str(a), device="cpu")[0].raptor_identity  # the cache's identity
    assert grid.model_slug(str(a)) != grid.model_slug(str(b))


@pytest.mark.parametrize("pair", [("org/a", "org_a"), ("Org/M", "org/m"), ("org/M", "org_M"),
                                  ("x" * 61 + "a", "x" * 61 + "b"), ("a b", "a_b")])
def test_different_models_never_share_a_folder(pair):
    """Folder names that differ also differ on a case-insensitive file system."""
    assert len({grid.model_slug(m).casefold() for m in pair}) == 2
    assert grid.model_slug("smollm2") == "smollm2"  # a plain name keeps its folder


def test_two_hub_ids_with_one_sanitized_name_run_as_two_models(tmp_path, monkeypatch):
    """``org/a`` and ``org_a`` were refused as "not distinct" (their folders collided): each gets its own folder."""
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "cache"))
    ran = []
    monkeypatch.setattr(empirical_figures, "run", lambda folder, model, **kw: ran.append((folder, model)))
    monkeypatch.setattr(grid, "grid_tables", lambda out, models: {})
    monkeypatch.setattr(grid, "plot_grid", lambda out: [])
    grid.run(tmp_path / "out", ["org/a", "org_a"], n_jobs=1)
    assert [m for _, m in ran] == ["org/a", "org_a"] and ran[0][0] != ran[1][0]


def test_a_folder_collision_is_named_as_one(tmp_path, monkeypatch):
    """Should two different models ever get one folder name, the error says so (not "not distinct")."""
    monkeypatch.setenv("RAPTOR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(grid, "model_slug", lambda model: "same")
    with pytest.raises(ValueError, match=r"--models lists 'org/a' and 'org/b', two different models whose output "
                                         r"folders .* would be one folder"):
        grid.check_models(["org/a", "org/b"])


@pytest.mark.parametrize("models, message", [(["org/a"], "at least two"), ("org/a", "must be a list"),
                                             (["org/a", " "], "not a model name")])
def test_bad_model_lists_are_named(models, message):
    with pytest.raises(ValueError, match=f"--models .*{message}|--models {message}"):
        grid.check_models(models)
