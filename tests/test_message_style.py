"""One error-message style (issue 55 section 4; docs/errors_and_guarantees.md, "One message style").

An argument error reads ``[<where>: ]<name> must <requirement>, got <value>``: the floor's wording
(``empirical.common.checks``).  Two checks hold the project to it:

- the hostile calls of ``tests/test_contract.py`` (its machinery, imported): every ``ValueError`` / ``TypeError`` whose
  message names the parameter must read that way (one hostile value per parameter, the one every kind has: an
  ``object()``, so the run stays short);
- the source: every ``raise ValueError(...)`` / ``raise TypeError(...)`` with a literal message in ``cgmt``, ``sims``,
  ``empirical`` and ``paper_figures`` that states a requirement (`` must ``) gives the value after it (``, got ...``),
  and none uses the other styles the project had (``name: must ...``, ``...; got ...``, ``name: need ...``,
  ``name: expected ...``, ``invalid ...``, ``expected name to be ...``).
"""
from __future__ import annotations

import ast
import contextlib
import io
import re
import warnings
from pathlib import Path

import pytest
import test_contract as contract
from test_contract import _sandbox  # noqa: F401 - the contract's sandbox (cwd, cache, offline), autouse here too

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cgmt", "sims", "empirical", "paper_figures")

#: ``[<where>: ]<name> must <requirement>, got <value>``; ``<where>`` is a context prefix (``error_context``'s
#: ``dataset sst2, layer 3: ``, a converter's ``from_gcm: ``, a file ``'/x.json': ``), the name may carry a gloss
#: (``seed (--seed)``) or an owner (``template of dataset 'x'``), never end in a colon
ARGUMENT_ERROR = re.compile(r"^(?:[^\n]*?: )?(?P<name>[^:;\n]*[^:;\s]) must (?P<requirement>.+?), got (?P<value>.+)$",
                            re.S)
#: the styles the project used besides the one above
OTHER_STYLES = {
    "'<name>: must ...'": re.compile(r"^\{?[\w.\[\]]+\}?: must\b"),
    "'...; got ...'": re.compile(r"; got\b"),
    "'<name>: need ...'": re.compile(r"^\{?[\w.\[\]]+\}?: needs? \b"),
    "'<name>: expected ...'": re.compile(r"^\{?[\w.\[\]]+\}?: expected\b"),
    "'invalid ...'": re.compile(r"^invalid\b", re.I),
    "'expected <name> to be ...'": re.compile(r"\bexpected \S+ to be\b"),
}


def _template(node) -> str | None:
    """The message's text with each ``{expression}`` kept as written; None when it is not a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Subscript):  # f"..."[:300]
        return _template(node.value)
    return None


def raised_messages(root: Path = ROOT):
    """``(path:line, exception, message template)`` of every ``raise ValueError/TypeError(<literal>)``."""
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                        and isinstance(node.exc.func, ast.Name) and node.exc.func.id in ("ValueError", "TypeError")
                        and node.exc.args):
                    message = _template(node.exc.args[0])
                    if message is not None:
                        yield f"{relative}:{node.lineno}", node.exc.func.id, message


def style_problem(message: str) -> str:
    """'' when a message template keeps the one style, else which rule it breaks."""
    for style, pattern in OTHER_STYLES.items():
        if pattern.search(message):
            return f"uses the style {style}"
    subject = message.split(" must ", 1)[0]
    if " must " in message and ";" not in subject and not ARGUMENT_ERROR.match(message):
        return "states a requirement without ', got <value>' after it (or the name ends in a colon)"
    return ""


def style_violations(root: Path = ROOT) -> list[str]:
    return [f"{where} {exc}: {problem}: {message[:120]!r}" for where, exc, message in raised_messages(root)
            if (problem := style_problem(message))]


def test_every_literal_message_keeps_the_one_style():
    violations = style_violations()
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("message, breaks", [
    ("delta must lie in (0.0, inf), got -1.0", False),
    ("layer 3, split seed 5: device must be a torch device, got '  '", False),
    ("seed (--seed) must be an integer >= 0, got -1", False),
    ("{str(path)!r}: label column {column!r} must hold 0/1, got {bad}", False),
    ("beta_star: must be a finite vector, got {x}", True),
    ("tie_break must be 'most_regularized' or 'first'; got {tie_break!r}", True),
    ("teacher must be finite", True),
    ("runs: need at least 2 ablation runs, got {runs}", True),
    ("parameters: expected {k} values, got shape {s}", True),
])
def test_the_style_rules_tell_the_styles_apart(message, breaks):
    assert bool(style_problem(message)) is breaks


def _names_it(entry, name, message):
    """The contract's test of naming, and the name as a word (``p`` is not named by "unsupported operand")."""
    words = [name, name.rstrip("_"), entry.defaults.get("name")]
    return contract._names(entry, name, message) and any(
        isinstance(w, str) and re.search(rf"(?<![\w-]){re.escape(w)}(?!\w)", message) for w in words)


def test_every_argument_error_of_the_contract_calls_keeps_the_one_style():
    """The contract's entry points called with an ``object()`` for each parameter in turn: every ValueError or
    TypeError naming that parameter reads ``<name> must <requirement>, got <value>`` (scikit-learn's own
    ``InvalidParameterError`` wording is scikit-learn's)."""
    found = []
    for key, entry in sorted(contract.ENTRIES.items()):
        if key in contract.EXCEPTIONS or key in contract.SLOW_BASE or entry.skip:
            continue
        for name, kind in entry.params.items():
            if f"{key}.{name}" in contract.EXCEPTIONS or "object" not in contract.HOSTILE[kind]:
                continue
            try:
                with warnings.catch_warnings(), contract._limit(contract.CALL_SECONDS), \
                        contextlib.redirect_stdout(io.StringIO()):
                    warnings.simplefilter("ignore")
                    entry.call(**{name: contract.HOSTILE[kind]["object"]()})
            except contract.Timeout:
                continue  # the contract test's finding, not this one's
            except (ValueError, TypeError) as exc:
                message = str(exc)
                if type(exc).__name__ != "InvalidParameterError" and _names_it(entry, name, message) \
                        and not ARGUMENT_ERROR.match(message):
                    found.append(f"{key}({name}=object()): {type(exc).__name__}: {message[:200]}")
            except Exception:  # noqa: BLE001 - other types are the contract test's business
                continue
    assert not found, "\n".join(found)
