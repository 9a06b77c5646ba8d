"""Two instances that talk over TCP on 127.0.0.1: the set-up the wire tests share."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pybroker

CONTRACT = "//Shop/OrderContract"
ORDER = "//Shop/Order"


def define_objects(db: pybroker.Database) -> None:
    db.create_message_type(ORDER)
    db.create_contract(CONTRACT, {ORDER: "ANY"})


def instance_pair(tmp_path: Path, *, retry_scale: float = 0.01, **endpoint: Any) -> tuple[
        pybroker.Instance, pybroker.Instance, pybroker.Database, pybroker.Database]:
    """Instance A holds database Shop (ShopService), instance B holds Stock (StockService);
    they trust each other, listen on free ports, and route to each other's service."""
    a = pybroker.connect(tmp_path / "a.duckdb", retry_scale=retry_scale)
    b = pybroker.connect(tmp_path / "b.duckdb", retry_scale=retry_scale)
    a.trust("B", b.certificate)
    b.trust("A", a.certificate)
    ea = a.start_endpoint(0, **endpoint)
    eb = b.start_endpoint(0, **endpoint)
    shop = a.create_database("Shop")
    stock = b.create_database("Stock")
    for db in (shop, stock):
        define_objects(db)
    shop.create_queue("ShopQueue")
    shop.create_service("ShopService", queue="ShopQueue")
    stock.create_queue("StockQueue")
    stock.create_service("StockService", queue="StockQueue", contracts=[CONTRACT])
    shop.create_route("ToStock", service_name="StockService", address=eb.address)
    stock.create_route("ToShop", service_name="ShopService", address=ea.address)
    return a, b, shop, stock


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "",
             poll: float = 0.02) -> Any:
    """``predicate()``'s first true value, polled until ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


def drain(db: pybroker.Database, queue: str, count: int, timeout: float = 60.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        got += db.receive(queue, max_messages=1000, timeout=0.2)
        if time.monotonic() > deadline:
            raise AssertionError(f"received {len(got)} of {count} messages in {timeout} s")
    return got
