"""A finding of ``pybroker diagnose``: what a rule found, where, what happens because of it
and what to do; and the forms it is shown in (an aligned table, JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pybroker.apps.diagnose.rules import SEVERITIES, Severity


@dataclass(frozen=True, slots=True)
class Finding:
    """``code`` and ``severity`` are the rule's (pybroker/docs/diagnose.md); ``instance``
    is the target as named, ``database`` the database involved (None: the instance as a
    whole), ``objects`` the routes, services, queues, endpoints or certificates involved
    (as ``kind name``); ``happens`` says what follows from it, ``fix`` what to do."""

    code: str
    severity: Severity
    title: str
    instance: str
    database: str | None
    objects: tuple[str, ...]
    happens: str
    fix: str

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "severity": self.severity, "title": self.title,
                "instance": self.instance, "database": self.database,
                "objects": list(self.objects), "happens": self.happens, "fix": self.fix}


def ordered(findings: Sequence[Finding]) -> list[Finding]:
    """Errors first, then warnings, then information; by code and place within each."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.code, f.instance,
                                           f.database or "", f.objects))


def table(findings: Sequence[Finding]) -> str:
    """The findings as aligned columns (severity, code, instance, database, objects), each
    followed by what happens and what to do on indented lines."""
    if not findings:
        return "no findings"
    head = ("severity", "code", "instance", "database", "objects")
    rows = [head] + [(f.severity, f.code, f.instance, f.database or "-",
                      ", ".join(f.objects) or "-") for f in findings]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(v.ljust(w) for v, w in zip(rows[0][:4], widths, strict=True))
             + "  " + rows[0][4]]
    for row, f in zip(rows[1:], findings, strict=True):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row[:4], widths, strict=True))
                     + "  " + row[4])
        lines.append(f"    {f.title}: {f.happens}")
        lines.append(f"    fix: {f.fix}")
    errors = sum(f.severity == "error" for f in findings)
    warnings = sum(f.severity == "warning" for f in findings)
    lines.append(f"{len(findings)} finding(s): {errors} error(s), {warnings} warning(s)")
    return "\n".join(lines)
