"""The step codes (R2.3, P5.2, C3) that pybroker's output, errors, README and comments cite,
and their explanations, read from the document the package ships (pybroker/docs/codes.md).

A code is a family letter (R routing, P protocols, C conversations), a group number
(``R2``) and optionally a step number (``R2.3``). The document gives each one a heading
whose level says which of the three it is; the text up to the next heading explains it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from pybroker.errors import BrokerError, NotFoundError
from pybroker.storage.resources import step_codes_document

Level = Literal["family", "group", "step"]

# The form of a code: family letter, group, step; no number starts with 0.
CODE_FORM = re.compile(r"([A-Z])(?:([1-9][0-9]*)(?:\.([1-9][0-9]*))?)?")

_LEVELS: dict[str, Level] = {"##": "family", "###": "group", "####": "step"}
_HEADING = re.compile(r"(#{2,4}) (\S+): (\S.*)")

# Characters a code copied out of a sentence may carry at either end: "(R2.3)," "R2.3."
_AROUND = " \t\r\n.,;:()[]`'\""

# Inputs longer than this are compared with no code: none is near.
_LONGEST_NEAR = 12


@dataclass(frozen=True, slots=True)
class StepCode:
    """One entry of the document: ``code`` (R, R2, R2.3), its ``title``, its ``text``
    (paragraphs as in the document, without the heading) and whether it is a family, a
    group of steps or one step."""

    code: str
    level: Level
    title: str
    text: str

    @property
    def parent(self) -> str | None:
        """The code of the entry this one belongs to (R2.3 -> R2, R2 -> R)."""
        if self.level == "step":
            return self.code.partition(".")[0]
        return self.code[0] if self.level == "group" else None


def _level_of(code: str) -> Level | None:
    m = CODE_FORM.fullmatch(code)
    if m is None:
        return None
    return "step" if m.group(3) else "group" if m.group(2) else "family"


def parse(text: str, *, source: str = "codes.md") -> list[StepCode]:
    """The entries of a step code document, in its order. A heading of the document's
    form (``### R2: ...``) whose code does not have its level's form, or a code given
    twice, is an error that names the line."""
    entries: list[StepCode] = []
    seen: set[str] = set()
    heading: tuple[str, Level, str] | None = None
    body: list[str] = []

    def close() -> None:
        if heading is not None:
            code, level, title = heading
            entries.append(StepCode(code, level, title, "\n".join(body).strip("\n")))

    for number, line in enumerate(text.splitlines(), 1):
        m = _HEADING.fullmatch(line.rstrip())
        if line.startswith("#"):
            if m is None or m.group(1) not in _LEVELS:
                if line.startswith("# ") and not entries and heading is None:
                    continue  # the document's title
                raise BrokerError(f"{source} line {number}: a heading that is not "
                                  "'## R: title', '### R2: title' or '#### R2.3: title'")
            code, level = m.group(2), _LEVELS[m.group(1)]
            if _level_of(code) != level:
                raise BrokerError(f"{source} line {number}: {code!r} is not a {level}'s "
                                  f"code under a {m.group(1)} heading")
            if code in seen:
                raise BrokerError(f"{source} line {number}: {code} is explained twice")
            seen.add(code)
            close()
            heading, body = (code, level, m.group(3).strip()), []
        elif heading is not None:
            body.append(line.rstrip())
    close()
    return entries


def read_shipped(path: Path, what: str) -> str:
    """The text of a document pybroker ships (``what`` it explains, for the error)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BrokerError(f"the explanation of {what} is missing from pybroker's package "
                          f"({path}: {exc.strerror or exc}); reinstall pybroker") from None


@cache
def step_codes(path: Path | None = None) -> tuple[StepCode, ...]:
    """Every entry of the shipped document (or of ``path``), read once."""
    path = path or step_codes_document()
    return tuple(parse(read_shipped(path, "the step codes"), source=str(path)))


def normalize(code: str) -> str:
    """``code`` as the document spells it: upper case, without the punctuation a code
    copied from a sentence carries ("(r2.3)," -> "R2.3")."""
    return code.strip(_AROUND).upper()


def explain(code: str, entries: tuple[StepCode, ...] | None = None) -> list[StepCode]:
    """The entry of ``code`` (any case), followed by those that belong to it: a group's
    steps, a family's groups and steps. An unknown code raises :class:`NotFoundError`
    with the codes nearest to it."""
    entries = step_codes() if entries is None else entries
    wanted = normalize(code)
    found = [e for e in entries if e.code == wanted]
    if not found:
        raise NotFoundError(_unknown(code, wanted, entries))
    return found + [e for e in entries if e.code != wanted and (
        e.parent == wanted or (e.level == "step" and e.code[0] == wanted))]


def _unknown(given: str, wanted: str, entries: tuple[StepCode, ...]) -> str:
    shown = given if len(given) <= 40 else given[:40] + "..."
    if not wanted:
        return (f"{shown!r} is not a step code; give one such as R2.3, a group such as R2, "
                "or a family (R, P or C)")
    codes = {e.code for e in entries}
    families = [e for e in entries if e.level == "family"]
    m = CODE_FORM.fullmatch(wanted)
    group = wanted.partition(".")[0]
    if m is not None and m.group(3) and group in codes:
        # A step its group lacks: the nearest of the group's steps, or the group itself.
        steps = [e.code for e in entries if e.parent == group]
        near = difflib.get_close_matches(wanted, steps, n=3, cutoff=0) if steps else [group]
        where = (f"{group} has steps {steps[0]} to {steps[-1]}" if steps
                 else f"{group} has no steps")
    else:
        near = (difflib.get_close_matches(wanted, sorted(codes), n=3, cutoff=0.6)
                if len(wanted) <= _LONGEST_NEAR else [])
        if m is not None and m.group(2) and m.group(1) in codes:
            groups = [e.code for e in entries if e.parent == m.group(1)]
            where = f"{m.group(1)} has {groups[0]} to {groups[-1]}"
        else:
            where = "codes begin with " + ", ".join(
                f"{e.code} ({e.title.lower()})" for e in families)
    message = f"no step code {shown!r}"
    if near:
        message += "; did you mean " + (
            near[0] if len(near) == 1 else ", ".join(near[:-1]) + " or " + near[-1]) + "?"
    return f"{message} ({where}); every code: pybroker explain"
