"""VALIDATION = WELL_FORMED_XML: whether a document is well-formed XML, as SEND
checks a body and T-SQL's CAST to XML checks a text."""

from __future__ import annotations

from xml.parsers import expat


def xml_problem(document: bytes | str) -> str | None:
    """The parser's explanation of why ``document`` is not well-formed XML, or None when
    it is. The callers decide what an empty document is (a SEND's empty body passes)."""
    parser = expat.ParserCreate()
    try:
        parser.Parse(document, True)
    except expat.ExpatError as exc:
        return str(exc)
    return None
