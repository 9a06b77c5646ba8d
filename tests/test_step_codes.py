"""The step codes (R2.3, P5.2, C3): every code the project prints or cites is explained in
the document the package ships (pybroker/docs/codes.md), that document is well formed, and
``pybroker explain`` prints an entry or refuses cleanly."""

from __future__ import annotations

import ast
import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.cli.finding_codes import finding_codes, is_finding_code
from pybroker.cli.main import main
from pybroker.cli.step_codes import explain, normalize, parse, step_codes
from pybroker.errors import BrokerError, NotFoundError
from pybroker.storage.resources import step_codes_document

ROOT = Path(__file__).resolve().parent.parent

# A code as the project cites it: family letter, group and maybe step, no number starting
# with 0 (so "C0 controls" is not one), not inside a word or name ("AdventureWorks2008R2",
# "test_R7_..."); the ends of a range ("R2.1-R2.3") are two codes.
CITED = re.compile(r"(?<![\w.])([RPC][1-9][0-9]*(?:\.[1-9][0-9]*)?)(?!\w)")

# Where the project prints or cites codes: its code, its templates, its DDL, README, the
# data the demo routes, and the document itself (its entries refer to each other).
CITING = ("pybroker/**/*.py", "pybroker/**/*.json", "pybroker/**/*.md", "sql/**/*.sql",
          "migrations/*.sql", "README.md")


def cited_codes(text: str) -> set[str]:
    return set(CITED.findall(text))


def citations() -> dict[str, set[str]]:
    """Code -> the files that cite it."""
    found: dict[str, set[str]] = {}
    for pattern in CITING:
        for path in sorted(ROOT.glob(pattern)):
            for code in cited_codes(path.read_text(encoding="utf-8")):
                found.setdefault(code, set()).add(str(path.relative_to(ROOT)))
    return found


def explained() -> set[str]:
    return {e.code for e in step_codes()}


def test_the_citation_pattern_finds_codes_and_only_codes():
    text = ("# R2.3 picks one; SPEC R1-R4 and R2.1-R2.3 (P5.2), C3's queue, R10.6.\n"
            "AdventureWorks2008R2, C0 controls, EC P-256, test_R7_example, x.R2, R2_3, P2P")
    assert cited_codes(text) == {"R2.3", "R1", "R4", "R2.1", "P5.2", "C3", "R10.6"}


def test_every_code_the_project_prints_or_cites_is_explained():
    found = citations()
    assert len(found) > 50  # the scan reads the project (a wrong glob finds nothing)
    missing = {code: files for code, files in found.items() if code not in explained()}
    assert missing == {}, "codes cited but not explained in pybroker/docs/codes.md:\n" + \
        "\n".join(f"{code}: {', '.join(sorted(files))}" for code, files in sorted(missing.items()))


def test_the_document_explains_the_codes_the_routing_trace_prints():
    from pybroker.core.routing.decision import STEP_TEXT

    assert set(STEP_TEXT) <= explained()


def _number(code: str) -> tuple[int, ...]:
    return tuple(int(n) for n in code[1:].split(".") if n)


def test_the_document_is_well_formed_and_numbered_without_gaps():
    entries = step_codes()
    codes = [e.code for e in entries]
    assert len(codes) == len(set(codes))
    assert all(e.title and e.text.strip() for e in entries), [
        e.code for e in entries if not (e.title and e.text.strip())]
    families = [e.code for e in entries if e.level == "family"]
    assert families == ["R", "P", "C"]
    for family in families:
        groups = [e for e in entries if e.parent == family]
        # groups 1..n in order, each directly after its family's or the previous group's
        # entries; a group's steps 1..m in order, right after it
        assert [_number(g.code) for g in groups] == [(n,) for n in range(1, len(groups) + 1)]
        for group in groups:
            steps = [e for e in entries if e.parent == group.code]
            assert [_number(s.code) for s in steps] == [
                (*_number(group.code), n) for n in range(1, len(steps) + 1)]
            at = codes.index(group.code)
            assert codes[at + 1:at + 1 + len(steps)] == [s.code for s in steps]
    # every entry is a family, or belongs to one that comes before it
    for at, entry in enumerate(entries):
        assert entry.parent is None or entry.parent in codes[:at], entry.code
    # the codes the project cites most widely are there, under the right headings
    assert {"R2.3", "R10.2", "P5.2", "P4.4", "C3", "C5"} <= set(codes)


def test_the_document_is_inside_the_package():
    document = step_codes_document()
    assert document == ROOT / "pybroker" / "docs" / "codes.md"
    assert document.is_file()


@pytest.mark.parametrize(("text", "problem"), [
    ("## R: Routing\ntext\n### R2.3: a step under a group's heading\ntext\n", "'R2.3' is not"),
    ("## R: Routing\ntext\n### R2: Matching\na\n### R2: Again\nb\n", "R2 is explained twice"),
    ("## R: Routing\ntext\n### Matching routes\ntext\n", "line 3: a heading that is not"),
])
def test_a_malformed_document_is_refused_naming_the_line(text, problem):
    with pytest.raises(BrokerError, match=re.escape(problem)):
        parse(text)


def test_parse_keeps_each_entry_text_up_to_the_next_heading():
    entries = parse("# Title\nintro\n## R: Routing\nAll of R.\n### R1: Tables\n\nOne.\nTwo.\n"
                    "#### R1.1: Own table\nThe first.\n")
    assert [(e.code, e.level, e.title, e.text) for e in entries] == [
        ("R", "family", "Routing", "All of R."), ("R1", "group", "Tables", "One.\nTwo."),
        ("R1.1", "step", "Own table", "The first.")]
    assert [e.parent for e in entries] == [None, "R", "R1"]


# -- what README and the messages name ------------------------------------------------------


def _string_literals_besides_docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docstrings]


def test_readme_and_messages_point_to_what_the_package_carries_not_to_spec():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "SPEC" not in readme
    assert "`pybroker explain R2.3`" in readme and "pybroker/docs/codes.md" in readme
    said = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(ROOT.glob("pybroker/**/*.py"))
            for line, text in _string_literals_besides_docstrings(path) if "SPEC" in text]
    assert said == []


# -- pybroker explain --------------------------------------------------------------------------


def run_explain(*args: str) -> tuple[int, str, str]:
    """``pybroker explain ARGS`` in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["explain", *args])
        except SystemExit as exc:  # argparse's usage errors and --help
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def entry(code: str):
    return next(e for e in step_codes() if e.code == code)


def test_explain_a_step_prints_its_entry_and_group():
    code, out, err = run_explain("R2.3")
    assert (code, err) == (0, "")
    first, _, rest = out.partition("\n")
    assert first == f"R2.3: {entry('R2.3').title}  [R2: {entry('R2').title}]"
    assert rest.split() == entry("R2.3").text.split()
    assert "one identifier is drawn" in rest


def test_explain_takes_any_case_and_a_code_copied_from_a_sentence():
    assert run_explain("r2.3") == run_explain("R2.3") == run_explain("(R2.3),")


def test_explain_a_group_lists_its_steps_in_order():
    code, out, err = run_explain("r2")
    assert (code, err) == (0, "")
    headings = [line.partition(":")[0] for line in out.splitlines()
                if line and not line.startswith(" ")]
    assert headings == ["R2", "R2.1", "R2.2", "R2.3", "R2.4", "R2.5", "R2.6", "R2.7"]
    assert entry("R2.7").text.split() == out.split("R2.7: ")[1].split("\n", 1)[1].split()


def test_explain_a_family_lists_its_codes_and_no_code_lists_all():
    code, out, _ = run_explain("P")
    assert code == 0
    assert out.startswith(f"P: {entry('P').title}\n  {entry('P').text.split()[0]} ")
    listed = [line.split()[0] for line in out.splitlines() if re.match(r"\s+P\d", line)]
    assert listed == [e.code for e in step_codes() if e.code[0] == "P" and e.code != "P"]
    assert "P5.2" in listed and "R2.3" not in out
    code, out, _ = run_explain()
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()] == [e.code for e in step_codes()]


@pytest.mark.parametrize(("given", "suggested", "where"), [
    ("R2.9", "did you mean R2.7", "(R2 has steps R2.1 to R2.7)"),
    ("r2.33", "did you mean R2.3,", "(R2 has steps R2.1 to R2.7)"),
    ("R23", "did you mean R2.3,", "(R has R1 to R10)"),
    ("R5.1", "did you mean R5?", "(R5 has no steps)"),
    ("X9", "", "(codes begin with R (routing), P (protocols"),
])
def test_an_unknown_code_is_a_usage_error_with_the_nearest_codes(given, suggested, where):
    code, out, err = run_explain(given)
    assert (code, out) == (2, "")
    assert err.startswith(f"pybroker: usage error: no step code {given!r}")
    assert suggested in err and where in err
    assert err.count("\n") == 1 and err.rstrip().endswith("every code: pybroker explain")


def test_the_library_raises_not_found_for_an_unknown_code():
    with pytest.raises(NotFoundError, match=r"no step code 'P10'; did you mean P1"):
        explain("P10")


def test_the_command_exits_2_on_an_unknown_code_and_0_on_a_known_one():
    done = subprocess.run([sys.executable, "-m", "pybroker", "explain", "C33"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("pybroker: usage error: no step code 'C33'; did you mean C3")
    done = subprocess.run([sys.executable, "-m", "pybroker", "explain", "c3"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.startswith("C3: ")


NEAR_CODES = st.from_regex(r"[RPCrpcXx]?[0-9]{0,3}(\.[0-9]{0,3})?[.,)]?", fullmatch=True)


@settings(max_examples=150, derandomize=True, deadline=None, database=None)
@given(st.one_of(st.text(max_size=30), NEAR_CODES))
def test_any_argument_gives_an_explanation_or_one_clean_error_line(text):
    code, out, err = run_explain(text)
    if code == 0 and not err:
        if text == "--":  # argparse's end of options: no code, so the list of them all
            assert out.splitlines()[0].split()[0] == "R"
        elif text.startswith("-"):  # argparse's --help
            assert out.startswith("usage: pybroker explain")
        elif is_finding_code(normalize(text)):  # a diagnose finding's (diagnose.md)
            assert normalize(text) in {e.code for e in finding_codes()}
            assert out.startswith(f"{normalize(text)}: ")
        else:
            assert normalize(text) in explained()
            assert out.startswith(f"{normalize(text)}: ")
    else:
        assert (code, out) == (2, "")
        assert err.startswith("pybroker: usage error: ") and err.count("\n") == 1
        assert "Traceback" not in err and "unexpected" not in err


def test_the_demo_says_once_where_the_codes_it_prints_are_explained():
    done = subprocess.run([sys.executable, "-m", "pybroker", "demo", "--example", "5"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    pointers = [line for line in done.stdout.splitlines() if "pybroker explain" in line]
    assert pointers == ["Step codes such as R2.3 are explained by: pybroker explain R2.3 "
                        "(a group: pybroker explain R2)"]
    printed = cited_codes(done.stdout)
    assert {"R2.3", "R3.3"} <= printed  # example 5 balances over broker identifiers
    assert printed <= explained()
