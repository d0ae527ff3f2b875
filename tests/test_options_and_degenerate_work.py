"""Issue "Guarantees as properties", sections 3 and 5: option conflicts are declared, never silently resolved,
and success is never reported for empty or degenerate work.  Grouped by pattern, named by subject."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from safetensors.numpy import save_file

import cgmt.__main__ as cgmt_cli
from empirical import cli
from empirical.common.cli_args import subparser
from empirical.common.files import MAX_JSON_DEPTH, json_ready
from empirical.probes import ConceptVectors, save_concept_vectors
from empirical.probes._interop import export_control_vector, export_directions, import_directions

pytest.importorskip("gguf")


# --- no artefact without content (E01, E02) -------------------------------------------------------------------

def test_export_gguf_of_only_layer_1_is_refused_not_an_empty_file(tmp_path, capsys):
    save_concept_vectors(tmp_path / "probes_one", ConceptVectors.from_directions({1: [1.0, 0.0]}))
    assert cli.main(["export", "--probe-file", str(tmp_path / "probes_one.json")]) == 2
    err = capsys.readouterr().err
    assert "nothing to export" in err
    assert not (tmp_path / "probes_one_control.gguf").exists()


@pytest.mark.parametrize("export", [export_control_vector, export_directions])
def test_export_with_no_layer_is_refused(tmp_path, export):
    with pytest.raises(ValueError, match="nothing to export"):
        export(tmp_path / "x.out", ConceptVectors.from_directions({3: [1.0, 0.0]}), layers=[])


def test_export_prints_the_count_written(tmp_path, capsys):
    save_concept_vectors(tmp_path / "p", ConceptVectors.from_directions({2: [1.0, 0.0], 3: [0.0, 1.0]}))
    assert cli.main(["export", "--probe-file", str(tmp_path / "p.json"), "--layers", "3"]) == 0
    assert "1 direction(s), RAPTOR layers 3..3" in capsys.readouterr().out


def test_concept_vector_file_with_a_negative_layer_is_refused_naming_the_file(tmp_path):
    save_concept_vectors(tmp_path / "p", ConceptVectors.from_directions({2: [1.0, 0.0], 3: [0.0, 1.0]}))
    js = tmp_path / "p.json"
    meta = json.loads(js.read_text())
    meta["layers"] = [-1, 3]
    from empirical.probes._persistence import _metadata_digest
    meta["metadata_sha256"] = _metadata_digest(meta)
    js.write_text(json.dumps(meta))
    from empirical.probes import load_concept_vectors
    with pytest.raises(ValueError, match=r"p\.json.*non-negative"):
        load_concept_vectors(js)


# --- one dtype rule for imported directions (S09) -------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint64])
def test_import_directions_refuses_non_floating_tensors(tmp_path, dtype):
    path = tmp_path / "d.safetensors"
    save_file({"1": np.ones(4, dtype=dtype)}, str(path))
    message = rf"tensor '1' must be a 1-D floating-point vector, got dtype {np.dtype(dtype)}"
    with pytest.raises(ValueError, match=message):
        import_directions(path)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_import_directions_accepts_floating_tensors(tmp_path, dtype):
    path = tmp_path / "d.safetensors"
    save_file({"1": np.ones(4, dtype=dtype)}, str(path))
    assert import_directions(path).layers == [2]


# --- bounded metadata (M01) -----------------------------------------------------------------------------------

def test_self_referencing_metadata_is_refused_with_the_depth_limit():
    loop = {}
    loop["self"] = loop
    with pytest.raises(ValueError, match=rf"^extra\S* is nested deeper than {MAX_JSON_DEPTH}"):
        json_ready(loop, "extra")


def test_deep_extra_on_save_is_a_value_error_not_recursion(tmp_path):
    deep = {}
    node = deep
    for _ in range(5000):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_JSON_DEPTH}"):
        save_concept_vectors(tmp_path / "p", np.eye(2), extra=deep)


# --- option tables: declared, enforced, walked (section 3) ---------------------------------------------------

def _tables():
    import paper_figures.__main__ as pf
    yield "raptor", cli.build_parser, cli.OPTIONS, cli.main
    yield "paper_figures", pf.build_parser, {None: pf.OPTIONS}, pf.main
    yield "cgmt", cgmt_cli._parser, cgmt_cli.OPTIONS, cgmt_cli.main


def _sample(parser, option):
    """A value for ``option`` other than its default (argv tokens)."""
    action = next(a for a in parser._actions if option in a.option_strings)
    if action.nargs == 0:
        return [option]
    if action.choices:
        values = [c for c in action.choices if c != action.default and [c] != action.default][:1]
        return [option, *map(str, values)]
    return [option, {"--strengths": "0.3", "--datasets": "sentiment", "--quick": "5", "--max-per-class": "10",
                     "--lam": "0.1", "--delta": "2", "--kappa": "1", "--deltas": "1", "--lams": "1",
                     "--kappas": "1"}.get(option, "x")]


def _required(parser, given):
    """argv tokens for the required options of ``parser`` not in ``given``."""
    return [t for a in parser._actions if a.required and a.option_strings and a.option_strings[0] not in given
            for t in _sample(parser, a.option_strings[0])]


def _cases():
    for prog, build, tables, main in _tables():
        for command, table in tables.items():
            for first, second in table.get("excludes", ()):
                yield pytest.param(prog, main, build, command, [first, second], f"{first} and {second} exclude",
                                   id=f"{prog}-{command}-{first}-excludes-{second}")
            for option, mode in table.get("needs", {}).items():
                yield pytest.param(prog, main, build, command, [option], f"{option} applies only with {mode}",
                                   id=f"{prog}-{command}-{option}-needs-{mode}")


def _parser_for(build, command):
    parser = build()
    return parser if command is None else subparser(parser, command)


@pytest.mark.parametrize("prog, main, build, command, options, message", list(_cases()))
def test_option_table_is_enforced(prog, main, build, command, options, message, capsys):
    parser = _parser_for(build, command)
    argv = ([] if command is None else [command]) + [t for o in options for t in _sample(parser, o)]
    argv += _required(parser, options)
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in err


@pytest.mark.parametrize("prog, main, build, command, options, message", list(_cases()))
def test_each_option_alone_passes_the_table(prog, main, build, command, options, message):
    from empirical.common.cli_args import enforce_options
    parser = _parser_for(build, command)
    table = next(tables[command] for name, _, tables, _ in _tables() if name == prog)
    mode = [table["needs"][options[0]]] if len(options) == 1 else []
    argv = [t for o in [*mode, options[0]] for t in _sample(parser, o)]
    argv += _required(parser, [*mode, options[0]])
    enforce_options(parser, parser.parse_args(argv), table)  # no SystemExit: the right combination is accepted


def test_every_cgmt_subcommand_declares_its_option_table():
    parser = cgmt_cli._parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert sorted(cgmt_cli.OPTIONS) == sorted(commands)


def test_a_repeated_cgmt_grid_value_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        cgmt_cli.main(["sweep", "--deltas", "1,1", "--lams", "1", "--kappas", "1", "--out", "x.csv"])
    assert exc.value.code == 2 and "--deltas lists 1.0 more than once" in capsys.readouterr().err


def test_every_raptor_subcommand_declares_its_option_table():
    """A new subcommand is a decision about its options' relations (an empty table says: none), not an omission."""
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert sorted(cli.OPTIONS) == sorted(commands)
    for command in commands:  # a subcommand with the data group has the shared data relations
        options = {o for a in subparser(parser, command)._actions for o in a.option_strings}
        if "--table" in options:
            assert set(cli.DATA_OPTIONS["needs"]) <= set(cli.OPTIONS[command]["needs"]), command


def test_every_table_names_only_real_options():
    for _, build, tables, _ in _tables():
        for command, table in tables.items():
            parser = _parser_for(build, command)
            named = {o for pair in table.get("excludes", ()) for o in pair} | set(table.get("needs", {})) | set(
                table.get("needs", {}).values()) | set(table.get("distinct", ())) | set(table.get("nonempty", ()))
            known = {s for a in parser._actions for s in a.option_strings}
            assert named <= known, (command, named - known)


@pytest.mark.parametrize("argv, message", [
    (["probe", "--baselines", "gcs", "gcs"], "--baselines lists gcs more than once"),
    (["steer", "--methods", "RAPTOR", "RAPTOR"], "--methods lists RAPTOR more than once"),
    (["steer", "--setting", ""], "--setting must not be empty"),
])
def test_raptor_duplicates_and_empty_names_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("module", ["empirical.cli", "cgmt.__main__", "paper_figures.__main__"])
def test_version_on_every_command_line(module, capsys):
    import importlib
    with pytest.raises(SystemExit) as exc:
        importlib.import_module(module).main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.strip().split()[-1][0].isdigit()


def test_unknown_setting_names_the_allowed_strengths_not_a_pattern():
    from empirical.llm._steering_settings import named_setting
    with pytest.raises(ValueError) as exc:
        named_setting("additive-best-k0.3-answer")
    message = str(exc.value)
    assert "strength 0.05/0.1/0.2/0.4/0.8" in message and "positions prompt/answer/all" in message
    assert "additive-best-k0.3-answer" in message and "\\\\" not in message and "[" not in message


# --- bounded or announced work (P09) --------------------------------------------------------------------------

def test_logregcv_warns_with_the_predicted_cost_before_a_huge_fit(monkeypatch):
    from empirical.probes import _baselines as baselines
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 5)), np.tile([0, 1], 20)
    monkeypatch.setattr(baselines, "LOGREGCV_WORK_BUDGET", 1e3)  # n = 12, p = 1e6 predicts 3e12 > 1e12
    with pytest.warns(UserWarning, match=r"predicted worst-case cost .* exceeds LOGREGCV_WORK_BUDGET"):
        baselines.LogRegCVProbe(Cs=[1.0, 2.0]).fit(X, y)


def test_logregcv_predicted_cost_of_the_reported_case_exceeds_the_budget_and_a_layer_does_not():
    from empirical.probes._baselines import LOGREGCV_WORK_BUDGET
    from empirical.probes._raptor import DEFAULT_CS
    assert len(DEFAULT_CS) * 1000 * 10**6 * (12 + 20) > LOGREGCV_WORK_BUDGET
    assert len(DEFAULT_CS) * 1000 * 2048 * (1000 + 20) < LOGREGCV_WORK_BUDGET


# --- errors name where they happened (F05) --------------------------------------------------------------------

def test_fit_layers_error_names_the_layer_and_split_seed():
    from empirical.probes import fit_layers
    rng = np.random.default_rng(0)
    H = rng.standard_normal((3, 60, 4))
    H[1] = np.nan
    with pytest.raises(ValueError, match=r"^layer 1, split seed 7: "):
        fit_layers(H, np.tile([0, 1], 30), random_state=7, layers=[1])


def test_error_context_prefixes_once():
    from empirical.common.checks import error_context
    with pytest.raises(ValueError, match=r"^dataset toy, layer 2: zero$"):
        with error_context(dataset="toy", layer=2):
            with error_context(dataset="toy", layer=2):
                raise ValueError("zero")


def test_paper_figures_layer_step_names_the_dataset_and_split_seed(monkeypatch, tmp_path):
    from paper_figures import empirical_figures as ef

    def degenerate(*args, **kwargs):
        raise ValueError("layer 3: the fitted direction is zero")
    monkeypatch.setattr(ef, "layer_table", degenerate)
    monkeypatch.setattr(ef, "load_table", lambda *a: None)

    class Steps:
        import contextlib
        step = staticmethod(lambda *a: Steps.contextlib.nullcontext())
    with pytest.raises(ValueError, match=r"^dataset toy, split seed 5: layer 3: the fitted direction is zero$"):
        ef._layers_for_seed(tmp_path, Steps, "toy", None, np.tile([0, 1], 20), None, 5, {}, 1.0, 1)


# --- answer words are words (G15) -----------------------------------------------------------------------------

@pytest.mark.parametrize("word", ["<pad>", "<eos>", "<bos>", "<unk>"])
def test_special_tokens_are_refused_as_answer_words(word):
    pytest.importorskip("transformers")
    from empirical.llm._answer_readout import answer_token_ids
    from empirical.testing import tiny_tokenizer
    with pytest.raises(ValueError, match=f"answer word '{word}' .* is a special token"):
        answer_token_ids(tiny_tokenizer(), (word, "no"))
    assert answer_token_ids(tiny_tokenizer(), ("Yes", "No"))  # ordinary words still pass
