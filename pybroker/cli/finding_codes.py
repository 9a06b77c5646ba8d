"""The finding codes of ``pybroker diagnose`` (D-CFG-001, D-RTE-004, D-CNV-002) and their
explanations, read from the document the package ships (pybroker/docs/diagnose.md), for
``pybroker explain``.

A finding code is ``D-`` with a family (CFG configuration, RTE routing, CNV conversation
hygiene) and a number. The document gives each one a ``### D-XXX-NNN: title`` heading; the
text up to the next heading explains it. A family's title is that of the ``##`` heading
above its first code.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pybroker.cli.step_codes import read_shipped
from pybroker.errors import BrokerError, NotFoundError
from pybroker.storage.resources import finding_codes_document

FINDING_CODE = re.compile(r"D-[A-Z]{3}-[0-9]{3}")
_FAMILY = re.compile(r"D-[A-Z]{3}")
_CODE_HEADING = re.compile(r"### (D-[A-Z]{3}-[0-9]{3}): (\S.*)")
_FAMILY_HEADING = re.compile(r"## [A-Z]: (\S.*)")


@dataclass(frozen=True, slots=True)
class FindingCode:
    """One finding code: ``code``, ``title``, ``text`` (its paragraphs) and ``family``
    (D-CFG) with the family's title."""

    code: str
    title: str
    text: str
    family: str
    family_title: str


def parse(text: str, *, source: str = "diagnose.md") -> list[FindingCode]:
    """The finding codes of the document, in its order; a code explained twice is an
    error that names the line."""
    entries: list[FindingCode] = []
    family_title = ""
    current: tuple[str, str] | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            code, title = current
            entries.append(FindingCode(code, title, "\n".join(body).strip("\n"), code[:5],
                                       family_title))

    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith("#"):
            if current is not None:
                body.append(line.rstrip())
            continue
        close()
        current, body = None, []
        m = _CODE_HEADING.fullmatch(line.rstrip())
        if m is not None:
            if any(e.code == m.group(1) for e in entries):
                raise BrokerError(f"{source} line {number}: {m.group(1)} is explained twice")
            current = (m.group(1), m.group(2).strip())
            continue
        family = _FAMILY_HEADING.fullmatch(line.rstrip())
        if family is not None:
            family_title = family.group(1).strip()
    close()
    return entries


@cache
def finding_codes(path: Path | None = None) -> tuple[FindingCode, ...]:
    """Every finding code of the shipped document (or of ``path``), read once."""
    path = path or finding_codes_document()
    return tuple(parse(read_shipped(path, "the finding codes"), source=str(path)))


def is_finding_code(wanted: str) -> bool:
    """Whether ``wanted`` (normalized: upper case) asks about finding codes: ``D-`` and on."""
    return wanted.startswith("D-")


def explain_finding(wanted: str, entries: tuple[FindingCode, ...] | None = None
                    ) -> list[FindingCode]:
    """The entry of a finding code, or every entry of a family (D-CFG) or of all (D-);
    an unknown one raises NotFoundError with the codes nearest to it."""
    entries = finding_codes() if entries is None else entries
    if wanted == "D-":
        return list(entries)
    if _FAMILY.fullmatch(wanted):
        found = [e for e in entries if e.family == wanted]
    else:
        found = [e for e in entries if e.code == wanted]
    if found:
        return found
    shown = wanted if len(wanted) <= 40 else wanted[:40] + "..."
    codes = [e.code for e in entries]
    near = difflib.get_close_matches(wanted, codes, n=3, cutoff=0.6)
    families = sorted({e.family for e in entries})
    message = f"no finding code {shown!r}"
    if near:
        message += "; did you mean " + (
            near[0] if len(near) == 1 else ", ".join(near[:-1]) + " or " + near[-1]) + "?"
    return_text = (f"{message} (finding codes are {', '.join(families)} with a number: "
                   "D-CFG-001); every code: pybroker diagnose --rules")
    raise NotFoundError(return_text)


def describe_findings(found: list[FindingCode]) -> str:
    """One code with its text and family; a family or all of them as one line each."""
    if len(found) == 1:
        e = found[0]
        return f"{e.code}: {e.title}  [{e.family}: {e.family_title}]\n" + "\n".join(
            f"  {line}" if line else "" for line in e.text.splitlines())
    return "\n".join(f"{e.code}  {e.title}" for e in found)
