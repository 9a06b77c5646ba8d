"""ALTER DATABASE ... SET PARTNER on master (R9): a database's role in a mirrored pair and
its partner, as sys.database_mirroring shows them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pybroker
from pybroker.core.tsql.batch import parse_batch
from pybroker.core.tsql.database_ddl import AlterDatabasePartner
from pybroker.errors import (
    InvalidArgumentError,
    MasterOnlyError,
    NotFoundError,
    TsqlSyntaxError,
    UnsupportedOptionError,
)


@pytest.fixture
def inst(tmp_path):
    i = pybroker.connect(tmp_path / "x.duckdb")
    yield i
    i.close()


def mirroring(inst: pybroker.Instance) -> list[tuple]:
    return inst.sql("SELECT database_name, mirroring_role_desc, mirroring_partner_name "
                    "FROM sys.database_mirroring WHERE mirroring_role_desc IS NOT NULL"
                    ).fetchall()


@pytest.mark.parametrize(("text", "statement"), [
    ("ALTER DATABASE Stock SET PARTNER = 'tcp://p:4022'",
     AlterDatabasePartner("Stock", "PARTNER", "tcp://p:4022")),
    ("alter database [Stock] set partner failover;", AlterDatabasePartner("Stock", "FAILOVER")),
    ("ALTER DATABASE Stock SET PARTNER OFF", AlterDatabasePartner("Stock", "OFF")),
])
def test_the_three_forms_parse_on_master(text, statement):
    assert parse_batch(text, master=True) == [statement]


@pytest.mark.parametrize(("text", "error", "words"), [
    ("ALTER DATABASE Stock SET RECOVERY SIMPLE", UnsupportedOptionError,
     "ENABLE_BROKER.*PARTNER"),
    ("ALTER DATABASE Stock SET PARTNER = tcp", TsqlSyntaxError, "partner's address as a string"),
    ("ALTER DATABASE Stock SET PARTNER RESUME", TsqlSyntaxError, "FAILOVER or OFF"),
    ("ALTER DATABASE Stock PARTNER OFF", TsqlSyntaxError, "SET PARTNER"),
])
def test_what_is_refused_says_what_is_understood(text, error, words):
    with pytest.raises(error, match=words):
        parse_batch(text, master=True)


def test_outside_master_it_is_not_supported():
    with pytest.raises(MasterOnlyError, match=r"SET PARTNER at line 1.*only in the master"):
        parse_batch("ALTER DATABASE Stock SET PARTNER OFF")


def test_set_partner_failover_and_off_run_on_master(inst):
    stock = inst.create_database("Stock")
    master = inst.database("master")
    master.execute("ALTER DATABASE Stock SET PARTNER = 'tcp://p:4022'")
    assert mirroring(inst) == [("Stock", "PRINCIPAL", "tcp://p:4022")]
    master.execute("ALTER DATABASE Stock SET PARTNER FAILOVER")
    assert stock.mirroring_role == "MIRROR"
    master.execute("ALTER DATABASE Stock SET PARTNER = 'tcp://q:4022'")  # the role is kept
    assert mirroring(inst) == [("Stock", "MIRROR", "tcp://q:4022")]
    master.execute("ALTER DATABASE Stock SET PARTNER OFF")
    assert mirroring(inst) == []


def test_a_failed_batch_changes_nothing(inst):
    inst.create_database("Stock")
    master = inst.database("master")
    master.execute("ALTER DATABASE Stock SET PARTNER = 'tcp://p:4022'")
    with pytest.raises(NotFoundError, match="'Nope' does not exist"):
        master.execute("ALTER DATABASE Stock SET PARTNER FAILOVER; "
                       "ALTER DATABASE Nope SET PARTNER OFF")
    assert mirroring(inst) == [("Stock", "PRINCIPAL", "tcp://p:4022")]
    with pytest.raises(NotFoundError, match="not part of a mirrored pair"):
        master.execute("ALTER DATABASE msdb SET PARTNER FAILOVER")


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    """One instance for all the generated partners (opening one costs ~0.2 s): each
    example leaves Stock in no pair, an accepted partner set OFF after it."""
    inst = pybroker.connect(tmp_path_factory.mktemp("p") / "x.duckdb")
    inst.create_database("Stock")
    yield inst
    inst.close()


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=60).filter(lambda s: "'" not in s))
def test_a_partner_that_is_not_an_address_is_refused_and_nothing_changes(stock, partner):
    master = stock.database("master")
    try:
        master.execute(f"ALTER DATABASE Stock SET PARTNER = '{partner}'")
    except InvalidArgumentError as exc:
        assert "tcp://host:port" in str(exc)
        assert mirroring(stock) == []
    except TsqlSyntaxError:  # not T-SQL text (a NUL, say): refused before it runs
        assert mirroring(stock) == []
    else:
        assert mirroring(stock) == [("Stock", "PRINCIPAL", partner)]
    finally:  # the next example starts with Stock in no pair, whatever this one did
        if mirroring(stock):
            master.execute("ALTER DATABASE Stock SET PARTNER OFF")
