"""The console of ``pybroker serve FILE --http-port N`` in a real headless browser (Debian's
chromium driven by selenium through chromedriver): the sign-in, every page loading without a
browser error, a queue's count rising as messages arrive, a search by handle, JSON."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service as DriverService
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import pybroker
from pybroker.api.served.paths import token_path_for
from pybroker.server.console import PAGES
from tests.process_helpers import Served, free_ports, wait_until

DOCS = Path(pybroker.__file__).parent / "docs"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=DriverService(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _until(driver, check, what: str):
    """The browser's next page, once it has loaded (a click navigates in the background)."""
    return WebDriverWait(driver, 30, poll_frequency=0.05).until(
        lambda d: check(d), message=f"the browser never showed {what}")


def _errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser")
            if entry["level"] == "SEVERE"]


def _cell(driver, table_id: str, row: int, column: str) -> str:
    table = driver.find_element(By.ID, table_id)
    heads = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
    rows = table.find_elements(By.TAG_NAME, "tr")[1:]
    return rows[row].find_elements(By.TAG_NAME, "td")[heads.index(column)].text


def test_the_console_in_a_headless_browser(tmp_path, browser):
    file = tmp_path / "shop.duckdb"
    with pybroker.connect(file, worker=False) as inst:
        db = inst.create_database("Shop")
        db.create_queue("Orders")
        db.create_service("OrderService", "Orders", ["DEFAULT"])
    child = Served(file, free_ports(1)[0], "--http-port", 0)
    try:
        child.start()
        child.ready()
        line = wait_until(lambda: next((x for x in child.lines()
                                        if x.startswith("console on http://")), None),
                          what="the console's address")
        console = line.split()[2]
        base = console.removesuffix("/console")
        token = token_path_for(file).read_text().strip()

        browser.get(console)  # not signed in: the sign-in page
        assert "sign in" in browser.title
        browser.find_element(By.ID, "token").send_keys("not the token")
        browser.find_element(By.ID, "signin").click()
        _until(browser, lambda d: "the token was not right" in d.page_source,
               "the sign-in page again, saying why")  # refused: the page again
        browser.find_element(By.ID, "token").send_keys(token)
        browser.find_element(By.ID, "signin").click()
        _until(browser, lambda d: d.title.startswith("Overview - shop.duckdb"), "the overview")
        browser.get_log("browser")  # the sign-in's 401s, logged as errors: meant

        for path in PAGES:  # every page loads, with no error in the browser
            browser.get(base + path)
            assert browser.find_element(By.TAG_NAME, "h1").text.startswith(PAGES[path])
            assert browser.find_element(
                By.CSS_SELECTOR, 'meta[http-equiv="refresh"]').get_attribute("content") == "5"
            assert _errors(browser) == [], path

        browser.get(f"{base}/console/queues")
        assert _cell(browser, "queues", 0, "ready_messages") == "0"
        with child.client() as client:
            conversation = client.database("Shop").begin_dialog("OrderService",
                                                                "OrderService")
            for n in range(3):
                conversation.send(f"order {n}")
        browser.refresh()  # what the page's own refresh does every 5 s
        assert _cell(browser, "queues", 0, "ready_messages") == "3"
        shot_queues = browser.get_screenshot_as_png()

        browser.get(f"{base}/console/conversations")
        browser.find_element(By.ID, "handle").send_keys(conversation.handle)
        browser.find_element(By.TAG_NAME, "button").click()
        table_id = "conversation-" + "".join(
            c if c.isalnum() else "-" for c in conversation.handle.lower())
        _until(browser, lambda d: d.find_elements(By.ID, table_id), "the conversation found")
        # both endpoints of its conversation, the initiator first
        assert _cell(browser, table_id, 0, "conversation_handle") == conversation.handle
        assert [_cell(browser, table_id, n, "is_initiator") for n in (0, 1)] == ["True",
                                                                                 "False"]
        assert _cell(browser, table_id, 1, "state_desc") == "CONVERSING"
        shot_conversations = browser.get_screenshot_as_png()

        # the same page as JSON, signed in with the browser's cookie
        cookie = browser.get_cookie("pybroker_console")
        request = urllib.request.Request(
            f"{base}/console/queues?format=json",
            headers={"Cookie": f"pybroker_console={cookie['value']}"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            page = json.load(answer)
        [queues] = page["tables"]
        ready = queues["columns"].index("ready_messages")
        assert [row[ready] for row in queues["rows"]] == [3]

        for shot in (shot_queues, shot_conversations):
            assert shot.startswith(b"\x89PNG")
        if os.environ.get("PYBROKER_UPDATE_SCREENSHOTS"):  # README's pictures
            (DOCS / "console-queues.png").write_bytes(shot_queues)
            (DOCS / "console-conversations.png").write_bytes(shot_conversations)
    finally:
        child.close()
