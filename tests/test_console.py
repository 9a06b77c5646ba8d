"""The console's pages from an embedded instance (pybroker.serve_metrics): sign-in, JSON,
filter and sort, route_explain, and any text a catalog holds shown escaped."""

from __future__ import annotations

import html.parser
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.server.console import Page, Table, arrange, to_html


def _get(url: str, cookie: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture
def served(tmp_path):
    with pybroker.connect(tmp_path / "shop.duckdb", worker=False) as inst:
        db = inst.create_database("Shop")
        for queue in ("Orders", "Audit"):
            db.create_queue(queue)
            db.create_service(f"{queue}Service", queue, ["DEFAULT"])
        db.create_route("ToFar", service_name="FarService", address="tcp://127.0.0.1:9")
        conversation = db.begin_dialog("OrdersService", "OrdersService")
        conversation.send("one")
        yield inst, pybroker.serve_metrics(inst, token="secret-token")


def test_sign_in_then_json_filter_sort_and_route_explain(served):
    _, server = served
    base = server.address
    status, page = _get(f"{base}/console/queues")
    assert status == 401 and "sign in with the client token" in page
    form = urllib.parse.urlencode({"token": "wrong", "next": "/console/queues"}).encode()
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{base}/console/login", data=form, timeout=30)
    assert refused.value.code == 401
    cookie = "pybroker_console=secret-token"
    status, text = _get(f"{base}/console/queues?format=json&sort=ready_messages&desc=1",
                        cookie)
    [queues] = json.loads(text)["tables"]
    rows = [dict(zip(queues["columns"], r, strict=True)) for r in queues["rows"]]
    assert [(r["queue_name"], r["ready_messages"]) for r in rows] == [("Orders", 1),
                                                                      ("Audit", 0)]
    status, text = _get(f"{base}/console/queues?format=json&q=aud", cookie)
    assert [r[1] for r in json.loads(text)["tables"][0]["rows"]] == ["Audit"]
    status, text = _get(f"{base}/console/routes?format=json&database=Shop&service=FarService",
                        cookie)
    routes, explained = json.loads(text)["tables"]
    assert "ToFar" in [r[1] for r in routes["rows"]]
    assert explained["title"] == "route_explain('Shop', 'FarService')"
    assert explained["rows"] and explained["columns"] == ["step", "description",
                                                          "candidates", "result"]
    status, text = _get(f"{base}/console/routes?format=json&database=NoSuch&service=X",
                        cookie)
    assert status == 200 and "NoSuch" in json.loads(text)["tables"][1]["note"]
    assert _get(f"{base}/console/nothing", cookie)[0] == 404
    status, text = _get(f"{base}/console/conversations?format=json&handle=not-a-handle",
                        cookie)
    assert "no conversation endpoint has" in json.loads(text)["tables"][1]["note"]


def test_an_open_console_listens_on_loopback_only(tmp_path):
    with pybroker.connect(tmp_path / "i.duckdb", worker=False) as inst:
        with pytest.raises(pybroker.InvalidArgumentError, match=r"127\.0\.0\.1 only"):
            pybroker.serve_metrics(inst, host="0.0.0.0")
        server = pybroker.serve_metrics(inst)  # loopback: open
        assert _get(f"{server.address}/console")[0] == 200


class _Text(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.tags: list[str] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "td":
            self.cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.cells.append("".join(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=20).filter(lambda t: t.strip() == t),
                min_size=1, max_size=5))
def test_any_text_a_catalog_holds_is_shown_as_text(values):
    page = Page("/console/queues", "Queues", [Table("Queues", ["name"], [[v] for v in values])])
    arrange(page, {"sort": "name"})
    parser = _Text()
    parser.feed(to_html(page, {}, "i.duckdb"))
    assert parser.cells == sorted(values)  # escaped, and sorted as asked
    assert "script" not in parser.tags


def test_the_findings_page_shows_diagnose_over_this_instance(served):
    inst, server = served
    status, text = _get(f"{server.address}/console/findings?format=json",
                        "pybroker_console=secret-token")
    assert status == 200, text
    page = json.loads(text)
    [table] = page["tables"]
    expected = [f.code for f in pybroker.diagnose([inst])]
    assert [row[0] for row in table["rows"]] == expected
    assert page["text"].startswith("digraph")
    assert "Orders" in page["text"]
