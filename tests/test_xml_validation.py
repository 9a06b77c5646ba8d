"""VALIDATION = WELL_FORMED_XML's check (pybroker/core/conversation/validation.py), shared by
SEND and T-SQL's CAST to XML."""

from pybroker.core.conversation.validation import xml_problem


def test_a_well_formed_document_has_no_problem_as_bytes_or_text():
    assert xml_problem(b"<order id='1'><item/></order>") is None
    assert xml_problem("<a>é</a>") is None


def test_a_document_that_is_not_well_formed_says_where():
    assert "mismatched tag" in xml_problem(b"<a><b></a>")
    assert "line 1" in xml_problem("<a>")
    assert xml_problem(b"") is not None  # empty: the callers let it pass, not the parser
