"""The read-only web console of a served instance (``/console`` on ``--http-port``).

Every page is rendered on the server from the same rows its JSON gives (``?format=json``):
no build step, no JavaScript, nothing fetched from elsewhere. A page refreshes itself every
few seconds (a meta refresh keeps its URL, so its filter and sort stay); a table sorts by the
column whose heading is followed (``?sort=column&desc=1``) and keeps the rows holding the text
of ``?q=``; the conversations page finds one conversation by its handle or its id
(``?handle=``) and the routes page traces the routing of ``?service=`` from ``?database=``
(route_explain, R2-R4).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlencode

from pybroker.errors import BrokerError
from pybroker.kernel.kernel import Kernel

REFRESH_SECONDS = 5
ROWS_SHOWN = 500  # rows a table shows at most (its JSON says how many there were)


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""


@dataclass
class Page:
    path: str
    title: str
    tables: list[Table] = field(default_factory=list)
    form: str = ""  # a search form's field: "handle", or "database service"
    text: str = ""  # shown as it is, under the tables (the topology's Graphviz source)


PAGES: dict[str, str] = {
    "/console": "Overview",
    "/console/queues": "Queues",
    "/console/conversations": "Conversations",
    "/console/transmission": "Transmission queue",
    "/console/routes": "Routes",
    "/console/connections": "Connections",
    "/console/activation": "Activation",
    "/console/events": "Broker events",
    "/console/findings": "Findings",
}


class Console:
    """The pages of one instance; ``read(template, params)`` runs a template of sql/ under
    the store's lock (the HTTP adapter's reader, which waits a bounded time)."""

    def __init__(self, kernel: Kernel,
                 read: Callable[[str, dict[str, Any] | None], tuple[list[str], list[tuple]]],
                 findings: Callable[[], tuple[list[dict[str, Any]], str]] | None = None
                 ) -> None:
        self.kernel = kernel
        self.read = read
        # pybroker diagnose over this instance: its findings and its topology's DOT source
        self.findings = findings

    def page(self, path: str, query: dict[str, str]) -> Page | None:
        title = PAGES.get(path)
        if title is None:
            return None
        page = Page(path, title)
        build = getattr(self, "_" + (path.removeprefix("/console").strip("/") or "overview"))
        build(page, query)
        return page

    def _table(self, title: str, template: str, params: dict[str, Any] | None = None,
               note: str = "") -> Table:
        columns, rows = self.read(template, params)
        return Table(title, columns, [list(r) for r in rows], note)

    def _overview(self, page: Page, query: dict[str, str]) -> None:
        page.tables += [self._table("Databases", "console/select_databases.sql"),
                        self._table("Queues", "metrics/select_queue_depths.sql"),
                        self._table("Conversation endpoints by state",
                                    "console/select_endpoint_states.sql"),
                        self._table("Transmission queue by status",
                                    "console/select_transmission_status.sql")]

    def _queues(self, page: Page, query: dict[str, str]) -> None:
        page.tables.append(self._table("Queues", "metrics/select_queue_depths.sql"))

    def _conversations(self, page: Page, query: dict[str, str]) -> None:
        page.form = "handle"
        handle = query.get("handle", "").strip() or None
        page.tables.append(self._table("Conversation endpoints by state",
                                       "console/select_endpoint_states.sql"))
        found = self._table(
            "Conversation endpoints" if handle is None else f"Conversation {handle}",
            "console/select_conversations.sql", {"handle": handle},
            "" if handle is None else "the endpoints of this handle's conversation")
        if handle is not None and not found.rows:
            found.note = f"no conversation endpoint has the handle or conversation id {handle}"
        page.tables.append(found)

    def _transmission(self, page: Page, query: dict[str, str]) -> None:
        page.tables.append(self._table("Transmission queue by status",
                                       "console/select_transmission_status.sql"))

    def _routes(self, page: Page, query: dict[str, str]) -> None:
        page.form = "database service"
        page.tables.append(self._table("Routes", "console/select_routes.sql"))
        service = query.get("service", "").strip()
        if service:
            database = query.get("database", "").strip() or "master"
            title = f"route_explain('{database}', '{service}')"
            names = {key.name.lower(): key.name for key in self.kernel.databases()}
            if database.lower() not in names:
                page.tables.append(Table(title, [], [], (
                    f"no database {database} in this instance: choose one of "
                    f"{', '.join(sorted(names.values()))}")))
                return
            database = names[database.lower()]
            try:
                page.tables.append(self._table(
                    f"route_explain('{database}', '{service}')", "console/explain_route.sql",
                    {"origin": database, "service_name": service}))
            except BrokerError as exc:
                page.tables.append(Table(f"route_explain('{database}', '{service}')", [], [],
                                         str(exc)))

    def _connections(self, page: Page, query: dict[str, str]) -> None:
        self.kernel.live.refresh()
        page.tables.append(self._table("Broker connections", "console/select_connections.sql"))

    def _activation(self, page: Page, query: dict[str, str]) -> None:
        self.kernel.live.refresh()
        page.tables.append(self._table("Queue monitors", "console/select_activation.sql"))

    def _findings(self, page: Page, query: dict[str, str]) -> None:
        if self.findings is None:
            page.tables.append(Table("Findings", [], [], "diagnose is not served here"))
            return
        found, picture = self.findings()
        columns = ["code", "severity", "title", "database", "objects", "happens", "fix"]
        page.tables.append(Table(
            "Findings of pybroker diagnose (this instance alone)", columns,
            [[f[c] if c != "objects" else ", ".join(f[c]) for c in columns] for f in found],
            "" if found else "no finding: nothing diagnose checks is wrong here"))
        page.text = picture

    def _events(self, page: Page, query: dict[str, str]) -> None:
        page.tables.append(self._table("Broker events", "console/select_broker_events.sql"))


# -- filter and sort ---------------------------------------------------------------------


def arrange(page: Page, query: dict[str, str]) -> None:
    """Keep the rows holding ``q`` and sort by ``sort`` (``desc=1``: descending)."""
    text = query.get("q", "").strip().lower()
    sort = query.get("sort", "")
    descending = query.get("desc") == "1"
    for table in page.tables:
        if text:
            table.rows = [r for r in table.rows
                          if any(text in _cell(v).lower() for v in r)]
        if sort in table.columns:
            index = table.columns.index(sort)
            table.rows.sort(key=lambda r: (r[index] is None, _sort_key(r[index])),
                            reverse=descending)


def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool):
        return (0, int(value))
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, _cell(value))


# -- rendering ---------------------------------------------------------------------------


def parse_query(raw: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(raw, keep_blank_values=True).items()}


def to_json(page: Page) -> str:
    return json.dumps({"page": page.path, "title": page.title, "tables": [
        {"title": t.title, "columns": t.columns, "rows": t.rows[:ROWS_SHOWN],
         "row_count": len(t.rows), "note": t.note} for t in page.tables],
        **({"text": page.text} if page.text else {})}, default=_json_value)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


_STYLE = """body{font:14px system-ui,sans-serif;margin:1em 2em;color:#222}
nav a{margin-right:1em}nav a.here{font-weight:bold}
table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:2px 6px}
th{background:#f0f0f0;text-align:left}th a{color:inherit}td.n{text-align:right}
.note{color:#a40}form{margin:.5em 0}"""


def to_html(page: Page, query: dict[str, str], instance_name: str) -> str:
    keep = {k: v for k, v in query.items() if k not in ("sort", "desc", "format")}
    nav = " ".join(
        f'<a href="{path}"{" class=here" if path == page.path else ""}>{html.escape(name)}</a>'
        for path, name in PAGES.items())
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">',
        f"<title>{html.escape(page.title)} - {html.escape(instance_name)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>{html.escape(page.title)} <small>{html.escape(instance_name)}</small></h1>",
        f"<nav>{nav}</nav>", _form(page, query),
    ]
    for table in page.tables:
        parts.append(_table_html(page, table, query, keep))
    if page.text:
        parts.append("<h2>Topology (Graphviz DOT: <code>dot -Tsvg</code> draws it)</h2>"
                     f"<pre id=topology>{html.escape(page.text)}</pre>")
    json_link = html.escape(f"{page.path}?{urlencode({**keep, 'format': 'json'})}")
    parts.append(f'<p><a href="{json_link}">this page as JSON</a></p></body></html>')
    return "\n".join(parts)


def _form(page: Page, query: dict[str, str]) -> str:
    fields = (page.form.split() if page.form else []) + ["q"]
    inputs = " ".join(
        f'<label>{"filter" if name == "q" else name} <input name="{name}" '
        f'id="{name}" value="{html.escape(query.get(name, ""))}"></label>'
        for name in fields)
    return f'<form method=get action="{page.path}">{inputs} <button>show</button></form>'


def _table_html(page: Page, table: Table, query: dict[str, str],
                keep: dict[str, str]) -> str:
    out = [f"<h2>{html.escape(table.title)}</h2>"]
    if table.note:
        out.append(f'<p class=note>{html.escape(table.note)}</p>')
    if not table.columns:
        return "\n".join(out)
    heads = []
    for column in table.columns:
        desc = "1" if query.get("sort") == column and query.get("desc") != "1" else "0"
        link = html.escape(f"{page.path}?{urlencode({**keep, 'sort': column, 'desc': desc})}")
        heads.append(f'<th><a href="{link}">{html.escape(column)}</a></th>')
    slug = "".join(c if c.isalnum() else "-" for c in table.title.lower())
    out.append(f'<table id="{html.escape(slug)}" data-rows="{len(table.rows)}">'
               f"<tr>{''.join(heads)}</tr>")
    for row in table.rows[:ROWS_SHOWN]:
        cells = "".join(
            f'<td class=n>{html.escape(_cell(v))}</td>'
            if isinstance(v, (int, float)) and not isinstance(v, bool)
            else f"<td>{html.escape(_cell(v))}</td>" for v in row)
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    if len(table.rows) > ROWS_SHOWN:
        out.append(f"<p class=note>{ROWS_SHOWN} of {len(table.rows)} rows shown: filter "
                   "to see the others</p>")
    return "\n".join(out)


LOGIN_PAGE = """<!doctype html><html lang=en><head><meta charset=utf-8>
<title>pybroker console: sign in</title><style>{style}</style></head><body>
<h1>pybroker console</h1><p class=note>{why}</p>
<form method=post action="/console/login"><label>client token
<input name=token id=token type=password autocomplete=off></label>
<input type=hidden name=next value="{next}"> <button id=signin>sign in</button></form>
<p>The token is the one the server keeps in FILE.token (the client token of
<code>pybroker serve --client-port</code>).</p></body></html>"""


def login_page(why: str, next_path: str = "/console") -> str:
    return LOGIN_PAGE.format(style=_STYLE, why=html.escape(why), next=html.escape(next_path))
