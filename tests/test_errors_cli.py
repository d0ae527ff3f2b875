"""Bad arguments and files for both command lines (``raptor`` and ``python -m cgmt``): a one-line error
naming the option or file and exit code 2 (argparse errors also exit 2), checked before any work,
no traceback unless ``--debug``, and nothing half-written left behind."""
from __future__ import annotations

import os

import numpy as np
import pytest

from cgmt.__main__ import main as cgmt_main

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from empirical import cli

pytestmark = pytest.mark.llm


def _run(argv, capsys):
    code = cli.main(argv)
    return code, capsys.readouterr().err


def _tmp_files(directory):
    return [p for p in directory.rglob("*") if p.name.startswith(".") or p.name.endswith(".tmp")]


ARGPARSE_ERRORS = {
    "tau above 1": (["steer", "--tau", "1.5"], "--tau"),
    "tau text": (["steer", "--tau", "high"], "--tau"),
    "huge layer range": (["probe", "--layers", "1-1000000000"], "at most 10000 layers"),
    "descending layer range": (["probe", "--layers", "9-3"], "must go up"),
    "K of 1": (["stability", "--K", "1"], "--K"),
    "drop 1.5": (["stability", "--drop", "1.5"], "--drop"),
    "no prompts": (["steer", "--n-prompts", "0"], "--n-prompts"),
    "batch size 0": (["extract", "--batch-size", "0"], "--batch-size"),
    "negative tokens": (["steer", "--max-new-tokens", "-1"], "--max-new-tokens"),
    "absurd strength": (["steer", "--strengths", "0.1,50"], "--strengths"),
    "too few random directions": (["steer", "--n-random", "2"], "--n-random"),
    "quick 0": (["extract", "--quick", "0"], "--quick"),
}


@pytest.mark.parametrize("case", sorted(ARGPARSE_ERRORS))
def test_invalid_option_values_are_argparse_errors(case, capsys):
    argv, option = ARGPARSE_ERRORS[case]
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert option in capsys.readouterr().err


def test_conflicting_and_orphan_options(cli_setup, capsys):
    # refused at parse time by the subcommand's option table (empirical.cli.OPTIONS), before any work
    root, base = cli_setup
    for argv, message in ((["--dataset", "cities", *base], "--dataset and --table exclude each other"),
                          (["--dataset", "cities", "--label-column", "x"], "--label-column applies only with --table")):
        with pytest.raises(SystemExit) as exc:
            cli.main(["extract", *argv, "--out", str(root / "c1")])
        assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not (root / "c1").exists()


def test_out_onto_a_file_or_unwritable_place(cli_setup, capsys):
    root, base = cli_setup
    (root / "a_file").write_text("keep me")
    code, err = _run(["extract", *base, "--out", str(root / "a_file")], capsys)
    assert code == 2 and "exists and is not a directory" in err and (root / "a_file").read_text() == "keep me"
    if os.geteuid() != 0:  # root writes anywhere
        locked = root / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        try:
            code, err = _run(["extract", *base, "--out", str(locked / "out")], capsys)
            assert code == 2 and "is not a writable directory" in err
        finally:
            locked.chmod(0o755)


def test_an_output_name_taken_by_a_directory_fails_before_the_work(cli_setup, capsys, monkeypatch):
    root, base = cli_setup
    out = root / "taken"
    (out / "probe_reviews.csv").mkdir(parents=True)
    monkeypatch.setattr(cli, "fit_layers", lambda *a, **k: pytest.fail("the work started"))
    code, err = _run(["probe", *base, "--out", str(out)], capsys)
    assert code == 2 and "probe_reviews.csv" in err and "a directory of that name exists" in err
    assert _tmp_files(out) == []


def test_bad_device_is_one_line(cli_setup, capsys):
    root, base = cli_setup
    argv = [a if a != "cpu" else "bogus" for a in base]
    code, err = _run(["extract", *argv, "--out", str(root / "dev")], capsys)
    assert code == 2 and "device must be a torch device" in err and "Traceback" not in err


@pytest.mark.parametrize("content", [b"\x93NUMPY garbage", b'{"format": "something else"}', b"[1, 2, 3]"])
def test_probe_file_that_is_not_ours(cli_setup, capsys, content):
    root, base = cli_setup
    (root / "foreign.json").write_bytes(content)
    (root / "foreign.safetensors").write_bytes(b"\x00" * 16)
    code, err = _run(["steer", *base, "--probe-file", str(root / "foreign.json"), "--out", str(root / "pf")], capsys)
    assert code == 2 and "foreign" in err and "pickle" not in err


def test_tau_that_excludes_every_layer_is_an_error(cli_setup, capsys):
    from sklearn.linear_model import LogisticRegression

    from empirical import ConceptVectors, save_concept_vectors

    root, base = cli_setup
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((20, 32)), np.arange(20) % 2
    # saved test accuracies that pass tau = 0.9; the probes were fitted on noise, so their validation accuracy on
    # this dataset does not: the layer rule must refuse (it never reads test accuracy)
    probes = ConceptVectors.from_estimators({layer: LogisticRegression().fit(X, y) for layer in (1, 2, 3)},
                                            {1: 0.99, 2: 0.99, 3: 0.99})
    save_concept_vectors(root / "weak", probes)
    code, err = _run(["steer", *base, "--probe-file", str(root / "weak.json"), "--tau", "0.9", "--answer-words",
                      "good,bad",
                      "--out", str(root / "weak_out")], capsys)
    assert code == 2 and "no layer can be steered for RAPTOR: tau=0.9 excludes 3 layer(s)" in err
    assert "best validation accuracy is" in err and "lower --tau" in err
    assert not (root / "weak_out" / "steer_metrics.csv").exists()


def test_missing_and_bad_tables(cli_setup, capsys):
    root, base = cli_setup
    argv = list(base)
    argv[argv.index("--table") + 1] = str(root / "nope.tsv")
    code, err = _run(["extract", *argv, "--out", str(root / "t")], capsys)
    assert code == 2 and "nope.tsv" in err
    (root / "three.tsv").write_text("text\tlabel\na\t0\nb\t1\nc\t2\n")
    argv[argv.index("--table") + 1] = str(root / "three.tsv")
    code, err = _run(["extract", *argv, "--out", str(root / "t")], capsys)
    assert code == 2 and "must hold binary labels" in err


def test_debug_shows_the_traceback(cli_setup, capsys):
    root, base = cli_setup
    without_labels = [t for t in base if t not in ("--label-column", "label")]  # a runtime ValueError
    code, err = _run(["extract", *without_labels, "--out", str(root / "dbg"), "--debug"], capsys)
    assert code == 2 and "Traceback" in err and "--table needs --text-column and --label-column" in err


# ------------------------------------------------------------------------------------------- cgmt
CGMT_ERRORS = {
    "absurd axis": (["sweep", "--deltas", "geom:0.1:10:1000000000", "--lams", "1", "--kappas", "1"], 2,
                    "NUM must be in 1..100000"),
    "absurd grid": (["sweep", "--deltas", "lin:1:2:2000", "--lams", "lin:1:2:1000", "--kappas", "1"], 2,
                    "has 2000000 points, more than the limit 1000000"),
    "negative lam": (["sweep", "--deltas", "1", "--lams", "-1", "--kappas", "1"], 2, "lams must lie in"),
    "geom from 0": (["sweep", "--deltas", "geom:0:1:5", "--lams", "1", "--kappas", "1"], 2, "START, STOP > 0"),
    "empty list": (["sweep", "--deltas", ",", "--lams", "1", "--kappas", "1"], 2, "at least one number"),
}


@pytest.mark.parametrize("case", sorted(CGMT_ERRORS))
def test_cgmt_sweep_refuses_bad_grids(case, tmp_path, capsys):
    argv, code, message = CGMT_ERRORS[case]
    try:
        got = cgmt_main([*argv, "--out", str(tmp_path / "s.csv"), "--no-progress"])
    except SystemExit as exc:
        got = exc.code
    assert got == code and message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where, message", [("missing/s.csv", "does not exist"), (".", "is a directory")])
def test_cgmt_sweep_checks_the_output_before_the_work(tmp_path, capsys, monkeypatch, where, message):
    import cgmt.__main__ as entry

    monkeypatch.setattr(entry, "sweep", lambda *a, **k: pytest.fail("the sweep ran"))
    code = cgmt_main(["sweep", "--deltas", "1", "--lams", "1", "--kappas", "1", "--out", str(tmp_path / where)])
    assert code == 2 and message in capsys.readouterr().err


def test_cgmt_sweep_writes_atomically(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert cgmt_main(["sweep", "--deltas", "1,2", "--lams", "1", "--kappas", "1", "--out", str(out),
                      "--no-progress"]) == 0
    assert out.read_text().startswith("delta,") and sorted(p.name for p in tmp_path.iterdir()) == ["s.csv"]
