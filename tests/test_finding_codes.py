"""``pybroker explain D-CFG-001``: every finding code of diagnose is explained from the
document the package ships (pybroker/docs/diagnose.md), under the rule's own title; an
unknown one is one clean usage error line."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pybroker.apps.diagnose.rules import RULES
from pybroker.cli.finding_codes import FINDING_CODE, explain_finding, finding_codes, parse
from pybroker.errors import BrokerError, NotFoundError
from tests.cli_helpers import call


def test_every_rule_is_explained_under_its_title_in_the_rules_order():
    entries = finding_codes()
    assert [(e.code, e.title) for e in entries] == [(r.code, r.title) for r in RULES]
    for entry, rule in zip(entries, RULES, strict=True):
        assert entry.text.startswith(f"**{rule.severity}.**"), entry.code
        assert FINDING_CODE.fullmatch(entry.code)
    assert {e.family_title for e in entries} == {"Configuration", "Routing",
                                                 "Conversation hygiene"}


def test_explain_a_finding_code_a_family_and_all(capsys):
    code, out, _ = call(["explain", "(d-cfg-001),"], capsys)
    assert code == 0 and out.startswith("D-CFG-001: a route to an instance named that has no such")
    assert "[D-CFG: Configuration]" in out.splitlines()[0] and "CREATE SERVICE" not in out[:20]
    code, out, _ = call(["explain", "D-RTE"], capsys)
    assert [line.split()[0] for line in out.splitlines()] == [
        r.code for r in RULES if r.code.startswith("D-RTE")]
    code, out, _ = call(["explain", "D-"], capsys)
    assert code == 0 and len(out.splitlines()) == len(RULES)


def test_an_unknown_finding_code_is_one_usage_error_line(capsys):
    code, out, err = call(["explain", "D-CFG-013"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("pybroker: usage error: no finding code 'D-CFG-013'; did you mean "
                          "D-CFG-012")
    assert err.count("\n") == 1 and "pybroker diagnose --rules" in err
    with pytest.raises(NotFoundError, match="no finding code 'D-XYZ'"):
        explain_finding("D-XYZ")


def test_a_code_explained_twice_is_refused_naming_the_line():
    with pytest.raises(BrokerError, match="line 3: D-CFG-001 is explained twice"):
        parse("## C: Configuration\n### D-CFG-001: one\n### D-CFG-001: two\n")


@settings(max_examples=60, derandomize=True, deadline=None, database=None)
@given(st.from_regex(r"[dD]-[A-Za-z]{0,4}(-[0-9]{0,4})?[.,)]?", fullmatch=True))
def test_any_d_code_gives_an_explanation_or_one_clean_error(text):
    try:
        found = explain_finding(text.strip(".,)").upper())
    except NotFoundError as exc:
        assert "\n" not in str(exc)
    else:
        assert found
