"""The outputs of the three command lines (``raptor``, ``python -m cgmt``, ``python -m paper_figures``): every option
naming something a command writes is declared with ``empirical.common.cli_args.output_path``, two outputs of one
command that are the same file or directory (in any spelling: the same text, ``./``, absolute against relative, a
symbolic or a hard link) are refused before anything runs, and a file is written in the format its name says or
refused (``cgmt sweep --out a.csv --plot a.csv`` used to write the table, then the figure over it, and print "wrote 2
rows to a.csv"), including a name whose last suffix says another format (``x.csv.png``); and an output another
process is writing (its lock held, ``empirical.common.files.output_lock``) is refused before anything runs, so two
writers of one output never both report success.

The options are enumerated from the parsers, so an output option added later is covered without editing this file,
and a path option that is neither declared an output nor listed in ``NOT_OUTPUTS`` fails.
"""
from __future__ import annotations

import argparse
import itertools
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from empirical.common.cli_args import IMAGE_SUFFIXES, output_options


def _programs():
    """``{prog: (main module, build_parser)}``."""
    import cgmt.__main__ as cgmt_main
    import empirical.cli as raptor_main
    import paper_figures.__main__ as figures_main

    return {"raptor": (raptor_main, raptor_main.build_parser), "cgmt": (cgmt_main, cgmt_main._parser),
            "paper_figures": (figures_main, figures_main.build_parser)}


def _commands():
    """``[(prog, command or None, parser)]`` of every command of the three programs."""
    out = []
    for prog, (_, build) in _programs().items():
        parser = build()
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        commands = [(name, p) for a in subs for name, p in a.choices.items()] or [(None, parser)]
        out += [(prog, name, sub) for name, sub in commands]
    return out


COMMANDS = _commands()
#: path options that name what a command reads (or a cache it keeps), not an output: ``{option: reason}``
NOT_OUTPUTS = {"--table": "the user's data table (read; refused as an output by refuse_overwriting_inputs)",
               "--data-dir": "the datasets (read)",
               "--probe-file": "saved concept vectors (read)",
               "--cache-dir": "the hidden-state cache, shared by runs and keyed by content, not a command's output",
               "--device": "a torch device name, not a path (typed non-empty)"}
#: the options a command needs besides its outputs, for a parse that reaches the output checks
REQUIRED = {("cgmt", "sweep"): ["--deltas", "1", "--lams", "1", "--kappas", "1"]}
#: file outputs whose format is chosen by another option, so the command checks the name (a test below each)
NAMED_BY_COMMAND = {("raptor", "export", "--out")}


def _ids(item):
    return "-".join(str(part) for part in item[:2] if part)


def test_every_path_option_is_an_output_or_an_input():
    undeclared = []
    for prog, command, parser in COMMANDS:
        outputs = {option for option, *_ in output_options(parser)}
        for action in parser._actions:
            if not action.option_strings or getattr(action.type, "__name__", "") != "path":
                continue
            option = action.option_strings[-1]
            if option not in outputs and option not in NOT_OUTPUTS:
                undeclared.append(f"{prog} {command or ''} {option}")
            if option in ("--out", "--plot", "--publish") and option not in outputs:
                undeclared.append(f"{prog} {command or ''} {option} (writes, not declared with output_path)")
    assert not undeclared, undeclared
    assert sum(len(output_options(p)) for *_, p in COMMANDS) >= 10  # the enumeration finds them


def _name(stem, kind, suffixes):
    return stem + (suffixes[0] if suffixes else "") if kind == "file" else stem


def _spellings(tmp_path, first, second):
    """``{spelling: (value of first, value of second)}``: one path written two ways (and, for a link, made)."""
    (_, _, kind_a, suffixes_a), (_, _, kind_b, suffixes_b) = first, second
    a = tmp_path / _name("x", kind_a, suffixes_a)
    link = tmp_path / _name("link", kind_b, suffixes_b)
    return {"same": (str(a), str(a)), "dot": (str(a), str(tmp_path / "." / a.name)),
            "absolute, relative": (str(a), a.name), "relative, absolute": (a.name, str(a)),
            "dotdot": (str(a), str(tmp_path / ".." / tmp_path.name / a.name)),
            "symlink to a new one": (str(a), str(link)), "symlink to an existing one": (str(a), str(link))}


def _make_link(spelling, tmp_path, first, values):
    """The link of a link spelling (and, for "an existing one", the output it points to)."""
    if spelling == "symlink to an existing one":
        target = tmp_path / Path(values[0]).name
        target.write_text("kept") if first[2] == "file" else target.mkdir()
    if spelling.startswith("symlink"):
        os.symlink(tmp_path / Path(values[0]).name, values[1])


PAIRS = [(prog, command, a, b) for prog, command, parser in COMMANDS
         for a, b in itertools.permutations(output_options(parser), 2)]


def _argv(prog, command, flags):
    return ([command] if command else []) + REQUIRED.get((prog, command), []) + flags


@pytest.fixture
def nothing_runs(monkeypatch):
    """Every program's command body fails the test if reached: a refusal must come before anything runs."""
    for module, _ in _programs().values():
        monkeypatch.setattr(module, "run_command", lambda *a, **k: pytest.fail("the command ran"))


def test_there_are_commands_with_two_outputs():
    assert {(prog, command) for prog, command, _, _ in PAIRS} >= {("cgmt", "sweep"), ("paper_figures", None)}


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{_ids(p)}-{p[2][0]}-{p[3][0]}")
def test_two_outputs_naming_the_same_path_are_refused_before_anything_runs(pair, tmp_path, monkeypatch, capsys,
                                                                             nothing_runs):
    prog, command, first, second = pair
    monkeypatch.chdir(tmp_path)
    main = _programs()[prog][0].main
    failures = []
    for spelling, values in _spellings(tmp_path, first, second).items():
        for entry in list(tmp_path.iterdir()):
            entry.unlink() if entry.is_symlink() or entry.is_file() else entry.rmdir()
        _make_link(spelling, tmp_path, first, values)
        before = {p.name: p.read_text() if p.is_file() else None for p in tmp_path.iterdir()}
        argv = _argv(prog, command, [first[0], values[0], second[0], values[1]])
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
        if exit_.value.code != 2 or len(errors) != 1:
            failures.append(f"{spelling}: exit {exit_.value.code}, {errors}")
        elif not ((first[0] in errors[0] and second[0] in errors[0] and "the same" in errors[0])
                  or "the name says" in errors[0]):  # a name that cannot say both formats: refused as such
            failures.append(f"{spelling}: {errors[0]}")
        after = {p.name: p.read_text() if p.is_file() else None for p in tmp_path.iterdir()}
        if after != before:
            failures.append(f"{spelling}: wrote {after}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("pair", [p for p in PAIRS if p[2][2] == "file" or p[3][2] == "file"] or [None],
                         ids=lambda p: f"{_ids(p)}-{p[2][0]}-{p[3][0]}" if p else "none")
def test_a_hard_link_to_another_output_is_the_same_file(pair, tmp_path, monkeypatch, capsys, nothing_runs):
    prog, command, first, second = pair
    a = tmp_path / _name("x", first[2], first[3])
    a.write_text("kept") if first[2] == "file" else a.mkdir()
    link = tmp_path / _name("link", second[2], second[3])
    if first[2] != "file":
        pytest.skip("directories have no hard links")
    os.link(a, link)
    with pytest.raises(SystemExit) as exit_:
        _programs()[prog][0].main(_argv(prog, command, [first[0], str(a), second[0], str(link)]))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "the same file" in err and a.read_text() == "kept"


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{_ids(p)}-{p[2][0]}-{p[3][0]}")
def test_two_different_outputs_are_accepted(pair, tmp_path, monkeypatch):
    prog, command, first, second = pair
    module = _programs()[prog][0]
    monkeypatch.setattr(module, "run_command", lambda *a, **k: 0)
    argv = _argv(prog, command, [first[0], str(tmp_path / _name("x", first[2], first[3])),
                                 second[0], str(tmp_path / _name("y", second[2], second[3]))])
    assert module.main(argv) == 0


FILE_OUTPUTS = [(prog, command, option, suffixes) for prog, command, parser in COMMANDS
                for option, _, kind, suffixes in output_options(parser) if kind == "file"]


def _other_required_outputs(prog, command, option, tmp_path):
    """The other outputs the command requires, each at its own valid name."""
    parser = next(p for g, c, p in COMMANDS if (g, c) == (prog, command))
    required = {a.option_strings[-1] for a in parser._actions if a.required and a.option_strings}
    return [part for other, _, kind, suffixes in output_options(parser) if other in required and other != option
            for part in (other, str(tmp_path / "other" / _name(other.strip("-"), kind, suffixes)))]


def test_every_file_output_says_its_format():
    assert {(prog, command, option) for prog, command, option, suffixes in FILE_OUTPUTS if not suffixes} \
        == NAMED_BY_COMMAND


@pytest.mark.parametrize("output", [o for o in FILE_OUTPUTS if o[3]], ids=lambda o: "-".join(filter(None, o[:3])))
def test_a_file_is_named_in_a_format_it_is_written_in(output, tmp_path, capsys, nothing_runs, monkeypatch):
    prog, command, option, suffixes = output
    module = _programs()[prog][0]
    others = _other_required_outputs(prog, command, option, tmp_path)
    for wrong in sorted({".txt", ".csv", ".png", ""} - set(suffixes)):
        with pytest.raises(SystemExit) as exit_:
            module.main(_argv(prog, command, [option, str(tmp_path / f"x{wrong}"), *others]))
        errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
        assert exit_.value.code == 2 and len(errors) == 1 and f"argument {option}" in errors[0], (wrong, errors)
    monkeypatch.setattr(module, "run_command", lambda *a, **k: 0)
    for right in suffixes:
        assert module.main(_argv(prog, command, [option, str(tmp_path / f"x{right.upper()}"), *others])) == 0
    assert list(tmp_path.iterdir()) == []


def test_image_suffixes_are_formats_matplotlib_writes():
    from matplotlib.figure import Figure

    supported = Figure().canvas.get_supported_filetypes()
    assert {s[1:] for s in IMAGE_SUFFIXES} <= set(supported)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".pdf", b"%PDF"), (".svg", b"<?xml"),
                                           (".jpg", b"\xff\xd8")])
def test_cgmt_sweep_writes_the_figure_in_the_format_its_name_says(suffix, magic, tmp_path, monkeypatch, capsys):
    import cgmt.__main__ as entry

    table = pd.DataFrame({"kappa": 1.0, "delta": 2.0, "lam": np.geomspace(0.01, 1, 3), "accuracy": [0.6, 0.7, 0.65],
                          "success": True})
    monkeypatch.setattr(entry, "sweep", lambda *a, **k: table)
    out, plot = tmp_path / "s.csv", tmp_path / f"s{suffix}"
    assert entry.main(["sweep", "--deltas", "2", "--lams", "0.01,0.1,1", "--kappas", "1", "--out", str(out),
                       "--plot", str(plot), "--no-progress"]) == 0
    assert plot.read_bytes().startswith(magic) and out.read_text().startswith("kappa,")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, plot.name])


@pytest.mark.parametrize("fmt, wrong", [("safetensors", ".gguf"), ("gguf", ".safetensors"), ("safetensors", ".json"),
                                        ("safetensors", "")])
def test_raptor_export_writes_the_format_its_out_name_says(fmt, wrong, tmp_path, capsys):
    """``raptor export --out``: the format is ``--format``'s, so the command checks the name against it (after the
    check that the file is not the input), before anything is written."""
    from empirical import cli
    from empirical.probes import ConceptVectors, LinearProbe, save_concept_vectors

    rng = np.random.default_rng(0)
    save_concept_vectors(tmp_path / "cv", ConceptVectors({2: LinearProbe(rng.standard_normal(8), 0.0)}))
    target = tmp_path / f"exported{wrong}"
    assert cli.main(["export", "--probe-file", str(tmp_path / "cv.json"), "--format", fmt, "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and f"written as .{fmt}" in err and len(err.strip().splitlines()) == 1
    assert not target.exists()
    right = tmp_path / "exported.safetensors"
    if fmt == "safetensors":
        assert cli.main(["export", "--probe-file", str(tmp_path / "cv.json"), "--format", fmt, "--out",
                         str(right)]) == 0 and right.exists()


def _bodies(monkeypatch, ran):
    """Replace every program's command body (what runs inside ``holding_outputs``) by one that records the run."""
    import cgmt.__main__ as cgmt_main
    import empirical.cli as raptor_main
    import paper_figures.__main__ as figures_main

    def body(*a, **k):
        ran.append(1)
        return 0

    for module in (cgmt_main, figures_main):
        monkeypatch.setattr(module, "_run", body)
    for name in dir(raptor_main):
        if name.startswith("cmd_"):
            monkeypatch.setattr(raptor_main, name, body)


OUTPUTS = [(prog, command, option, kind, suffixes) for prog, command, parser in COMMANDS
           for option, _, kind, suffixes in output_options(parser)]


@pytest.mark.parametrize("output", OUTPUTS, ids=lambda o: "-".join(filter(None, o[:3])))
def test_an_output_another_process_is_writing_is_refused_before_anything_runs(output, tmp_path, monkeypatch, capsys):
    """One writer per output (generated over every output of every command line): while another writer holds the
    output's lock (``files.output_lock``, as the command lines do from before their work until they exit), the
    command exits 2 with one line naming the option and the writer, and its body never runs; once released, it
    runs and leaves no lock file."""
    from empirical.common.files import output_lock

    prog, command, option, kind, suffixes = output
    ran = []
    _bodies(monkeypatch, ran)
    main = _programs()[prog][0].main
    path = tmp_path / _name("x", kind, suffixes or ((".safetensors",) if kind == "file" else ()))
    others = _other_required_outputs(prog, command, option, tmp_path)
    argv = _argv(prog, command, [option, str(path), *others])
    if (prog, command) == ("raptor", "export"):
        argv += ["--probe-file", str(tmp_path / "cv.json"), "--format", "safetensors"]
    with output_lock(tmp_path / "." / path.name, kind=kind):  # another spelling of the same output
        assert main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and option in errors[0] and f"being written by process {os.getpid()}" in errors[0], errors
    assert ran == []
    assert main(argv) == 0 and ran == [1]
    assert not [p for p in tmp_path.rglob("*.lock")]


@pytest.mark.parametrize("output", [o for o in FILE_OUTPUTS if o[3]], ids=lambda o: "-".join(filter(None, o[:3])))
def test_a_name_ending_in_another_format_after_the_right_one_is_refused(output, tmp_path, capsys, nothing_runs):
    """The format is the name's last suffix: ``x.csv.png`` for a CSV table says PNG, and is refused."""
    prog, command, option, suffixes = output
    module = _programs()[prog][0]
    others = _other_required_outputs(prog, command, option, tmp_path)
    for right in suffixes:
        wrong = next(s for s in (".png", ".csv", ".bak") if s not in suffixes)
        with pytest.raises(SystemExit) as exit_:
            module.main(_argv(prog, command, [option, str(tmp_path / f"x{right}{wrong}"), *others]))
        errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
        assert exit_.value.code == 2 and len(errors) == 1 and f"says {wrong}" in errors[0], (right, errors)
    assert list(tmp_path.iterdir()) == []


def _export_cases():
    from empirical.cli import EXPORT_SUFFIX

    written = set(EXPORT_SUFFIX.values())
    return [(fmt, wrong) for fmt, right in EXPORT_SUFFIX.items()
            for wrong in sorted((written - {right}) | {".txt", ".json", "", right + ".bak"})]


@pytest.mark.parametrize("fmt, wrong", _export_cases())
def test_raptor_export_refuses_every_name_of_another_format_before_writing(fmt, wrong, tmp_path, capsys, monkeypatch):
    """``raptor export --out`` (NAMED_BY_COMMAND: its format is ``--format``'s), generated over every format and every
    other name: refused before an exporter is called, nothing written."""
    from empirical import cli
    from empirical.probes import ConceptVectors, LinearProbe, save_concept_vectors

    for exporter in ("export_directions", "export_control_vector"):
        monkeypatch.setattr(cli, exporter, lambda *a, **k: pytest.fail("the export ran"))
    save_concept_vectors(tmp_path / "cv", ConceptVectors({2: LinearProbe(np.ones(8), 0.0)}))
    before = sorted(p.name for p in tmp_path.iterdir())
    target = tmp_path / f"exported{wrong}"
    assert cli.main(["export", "--probe-file", str(tmp_path / "cv.json"), "--format", fmt, "--out", str(target)]) == 2
    err = capsys.readouterr().err
    assert f"written as .{fmt}" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("output", OUTPUTS, ids=lambda o: "-".join(filter(None, o[:3])))
def test_a_link_planted_at_an_outputs_lock_is_never_written_through(output, tmp_path, monkeypatch, capsys):
    """No write follows a planted link (generated over every output of every command line): a symbolic link at the
    output's lock file (``.<name>.lock``, the one name a command creates beside its output before its work; the
    output itself and every temporary are written by the atomic helpers, tests/test_no_write_through_links.py)
    leaves the link's target byte-identical; the command either refuses with one line naming the lock file, or
    runs without following the link."""
    from empirical.common.files import output_lock_path

    prog, command, option, kind, suffixes = output
    ran = []
    _bodies(monkeypatch, ran)
    main = _programs()[prog][0].main
    victim = tmp_path / "outside" / "precious.bin"
    victim.parent.mkdir()
    victim.write_bytes(b"the user's own file\n")
    path = tmp_path / _name("x", kind, suffixes or ((".safetensors",) if kind == "file" else ()))
    if kind == "directory":
        path.mkdir()
    lock = output_lock_path(path, kind)
    lock.symlink_to(victim)
    others = _other_required_outputs(prog, command, option, tmp_path)
    argv = _argv(prog, command, [option, str(path), *others])
    if (prog, command) == ("raptor", "export"):
        argv += ["--probe-file", str(tmp_path / "cv.json"), "--format", "safetensors"]
    code = main(argv)
    assert victim.read_bytes() == b"the user's own file\n"
    if code == 2:
        errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
        assert len(errors) == 1 and lock.name in errors[0], errors
        assert ran == []
    else:
        assert code == 0 and ran == [1]
