"""The one error convention of the command lines (empirical.common.cli_errors): bad input -> one line and exit 2,
the traceback only on request, Ctrl-C -> one line and exit 130, SIGTERM -> the same clean-up and exit 143."""
import os
import signal
import time

import pytest

from cgmt import __main__ as cgmt_cli
from empirical.common.cli_errors import debug_requested, run_command


def _fail(exc):
    def command():
        raise exc
    return command


@pytest.mark.parametrize("exc", [ValueError("lam must be > 0"), FileNotFoundError("no such file: x.csv")])
def test_bad_input_is_one_line_and_exit_2(exc, capsys):
    assert run_command(_fail(exc), "prog sub") == 2
    err = capsys.readouterr().err
    assert err == f"prog sub: error: {exc}\n"  # one line, no traceback


def test_debug_adds_the_traceback_and_other_errors_propagate(capsys):
    assert run_command(_fail(ValueError("bad")), "prog", debug=True) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and err.endswith("prog: error: bad\n")
    with pytest.raises(RuntimeError):  # a bug is not dressed up as bad input
        run_command(_fail(RuntimeError("bug")), "prog")


def test_ctrl_c_is_exit_130_and_the_code_passes_through(capsys):
    assert run_command(_fail(KeyboardInterrupt()), "prog", interrupted="interrupted (cache kept)") == 130
    assert capsys.readouterr().err == "prog: interrupted (cache kept)\n"
    assert run_command(lambda: 0, "prog") == 0 and run_command(lambda: 1, "prog") == 1


def test_sigterm_is_handled_like_ctrl_c_with_exit_143_and_the_handler_is_restored(capsys):
    """A scheduler's stop (SLURM's time limit, ``kill``) runs the same clean-up as Ctrl-C (``finally`` blocks, the
    main job's run record), instead of killing the process where it stands."""
    before = signal.getsignal(signal.SIGTERM)
    cleaned = []

    def command():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the signal lands here
            return 0
        finally:
            cleaned.append(True)

    assert run_command(command, "prog", interrupted="interrupted (cache kept)") == 143
    assert cleaned == [True]
    assert capsys.readouterr().err == "prog: terminated (SIGTERM); interrupted (cache kept)\n"
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("flag, value, expected", [(False, None, False), (True, None, True), (False, "1", True),
                                                   (False, "0", False), (False, "", False)])
def test_debug_requested(flag, value, expected, monkeypatch):
    monkeypatch.delenv("PROG_DEBUG", raising=False)
    if value is not None:
        monkeypatch.setenv("PROG_DEBUG", value)
    assert debug_requested(flag, "PROG_DEBUG") is expected


def test_cgmt_command_line_follows_it(monkeypatch, capsys):
    assert cgmt_cli.main(["solve", "--delta", "2", "--kappa", "1"]) == 2
    assert capsys.readouterr().err == "cgmt: error: lam is required (or pass --mle)\n"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cgmt_cli, "solve", interrupted)
    assert cgmt_cli.main(["solve", "--delta", "2", "--lam", "0.1", "--kappa", "1"]) == 130
    assert capsys.readouterr().err == "cgmt: interrupted\n"


@pytest.mark.parametrize("point, call", [(["--lam", "0.1"], "cgmt.solve(delta=5.0, lam=0.1, kappa=1.0)"),
                                         (["--mle"], "cgmt.mle(delta=5.0, kappa=1.0)")])
def test_cgmt_solve_strict_that_does_not_converge_is_one_line_naming_the_point_and_exit_1(point, call, monkeypatch,
                                                                                           capsys):
    """``cgmt solve --strict`` at a point whose fixed point is not found: one line naming the point and the reason,
    exit code 1 (the code of a result that did not converge), no traceback; the solver is made to fail here (its
    real result marked unconverged), the CLI's path through ``report`` and ``ConvergenceError`` is the real one."""
    from cgmt import _solver

    solve = _solver._solve
    reason = "iteration limit reached (residual 3.2e-04 > tol 1e-10 after 100 iterations)"

    def not_converged(*args, **kwargs):
        out = solve(*args, **kwargs)
        out.update(success=False, status=1, message=reason)
        return out

    monkeypatch.setattr(_solver, "_solve", not_converged)
    argv = ["solve", "--delta", "5", "--kappa", "1", *point]
    assert cgmt_cli.main([*argv, "--strict"]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"cgmt: error: {call} did not converge: {reason}\n"
    assert captured.out == ""
    assert cgmt_cli.main(["--debug", *argv, "--strict"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "ConvergenceError" in err and err.endswith(f"{reason}\n")
    with pytest.warns(Warning, match="did not converge"):  # without --strict: the result printed, and exit 1 too
        assert cgmt_cli.main(argv) == 1
    assert "success" in capsys.readouterr().out


def test_a_convergence_error_is_one_line_and_exit_1_in_every_command_line(capsys):
    from empirical.common.failures import ConvergenceError

    assert run_command(_fail(ConvergenceError("x.fit(a=1) did not converge:\n line search failed")), "prog") == 1
    assert capsys.readouterr().err == "prog: error: x.fit(a=1) did not converge: line search failed\n"
