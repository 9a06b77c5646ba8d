"""A script in the shape of SQL Server's tutorial of a conversation between two instances,
secured by certificates, run through `pybroker sql` against two instance processes
(`pybroker serve`) that talk over TCP on 127.0.0.1: each instance makes its endpoint's
certificate and backs it up to a file, the other imports it for a login allowed to connect,
then the initiator sends a request, the target replies and ends, and the initiator ends.

The steps follow the tutorial's lessons in order. Two things differ, each said in
pybroker/docs/tsql.md: the endpoint authenticates by certificate (pybroker has no Windows
authentication), so the certificates live in master; and each instance's endpoint step
runs on its file before `pybroker serve` starts the instance process, which starts the
endpoint the file defines."""

from __future__ import annotations

import io

import pytest
from cli_helpers import call
from process_helpers import Served, free_ports, start_all, wait_until

import pybroker

ENDPOINT_STEP = """\
-- {who}: the instance's endpoint, secured by a certificate of its own, whose public part
-- is written to a file for the other instance.
USE master;
GO
IF EXISTS (SELECT * FROM sys.service_broker_endpoints WHERE name = N'{Who}Endpoint')
    DROP ENDPOINT {Who}Endpoint;
GO
CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'a long {who} master key password';
GO
CREATE CERTIFICATE {Who}EndpointCert
    WITH SUBJECT = N'{Who} instance endpoint',
    EXPIRY_DATE = N'12/31/2045';
GO
BACKUP CERTIFICATE {Who}EndpointCert TO FILE = N'{certs}/{who}_endpoint.cer';
GO
CREATE ENDPOINT {Who}Endpoint
    STATE = STARTED
    AS TCP (LISTENER_PORT = {port})
    FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE {Who}EndpointCert,
                        ENCRYPTION = REQUIRED);
GO
"""

OBJECTS_STEP = """\
-- {who}: its database, with a master key and a user of its own, the message types and
-- the contract both sides share, and its queue and service.
USE master;
GO
IF DB_ID(N'Inst{Who}DB') IS NOT NULL
    DROP DATABASE Inst{Who}DB;
GO
CREATE DATABASE Inst{Who}DB;
GO
USE Inst{Who}DB;
GO
CREATE MASTER KEY ENCRYPTION BY PASSWORD = N'a long {who} database key password';
GO
CREATE USER {Who}User WITHOUT LOGIN;
GO
CREATE MESSAGE TYPE [//Inst/Sample/RequestMessage] VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE [//Inst/Sample/ReplyMessage] VALIDATION = WELL_FORMED_XML;
GO
CREATE CONTRACT [//Inst/Sample/Contract]
    ([//Inst/Sample/RequestMessage] SENT BY INITIATOR,
     [//Inst/Sample/ReplyMessage] SENT BY TARGET);
GO
CREATE QUEUE Inst{Who}Queue;
CREATE SERVICE [//{Who}/Sample/{Who}Service]
    AUTHORIZATION {Who}User
    ON QUEUE Inst{Who}Queue {contracts};
GO
"""

REFERENCES_STEP = """\
-- {who}: what it knows of the other instance. In master, a login for the other's
-- endpoint, its user owning the other's certificate, and the right to connect; in the
-- database, a user for the far service, the route to it, and (the initiator) the binding
-- that names the user for dialogs to it.
USE master;
GO
CREATE LOGIN {Other}Login WITH PASSWORD = N'a long {other} login password';
CREATE USER {Other}User FOR LOGIN {Other}Login;
GO
CREATE CERTIFICATE {Other}EndpointCert
    AUTHORIZATION {Other}User
    FROM FILE = N'{certs}/{other}_endpoint.cer';
GO
GRANT CONNECT ON ENDPOINT::{Who}Endpoint TO {Other}Login;
GO
USE Inst{Who}DB;
GO
CREATE USER {Other}User WITHOUT LOGIN;
GO
CREATE ROUTE Inst{Other}Route
    WITH SERVICE_NAME = N'//{Other}/Sample/{Other}Service',
    ADDRESS = N'TCP://127.0.0.1:{other_port}';
GO
USE msdb;
GO
CREATE ROUTE Inst{Who}Route
    WITH SERVICE_NAME = N'//{Who}/Sample/{Who}Service',
    ADDRESS = N'LOCAL';
GO
USE Inst{Who}DB;
GO
{last}
GO
"""
GRANT_SEND = "GRANT SEND ON SERVICE::[//Target/Sample/TargetService] TO InitiatorUser;"
BINDING = """CREATE REMOTE SERVICE BINDING TargetBinding
    TO SERVICE N'//Target/Sample/TargetService'
    WITH USER = TargetUser;"""

BEGIN_STEP = """\
-- The initiator begins the conversation and sends its request.
USE InstInitiatorDB;
GO
DECLARE @InitDlgHandle UNIQUEIDENTIFIER;
DECLARE @RequestMsg NVARCHAR(100);
BEGIN TRANSACTION;
BEGIN DIALOG @InitDlgHandle
    FROM SERVICE [//Initiator/Sample/InitiatorService]
    TO SERVICE N'//Target/Sample/TargetService'
    ON CONTRACT [//Inst/Sample/Contract]
    WITH ENCRYPTION = ON;
SELECT @RequestMsg = N'<RequestMsg>A request for the target service.</RequestMsg>';
SEND ON CONVERSATION @InitDlgHandle
    MESSAGE TYPE [//Inst/Sample/RequestMessage] (@RequestMsg);
SELECT @RequestMsg AS SentRequestMsg;
COMMIT TRANSACTION;
GO
"""

REPLY_STEP = """\
-- The target receives the request, replies and ends its side of the conversation.
USE InstTargetDB;
GO
DECLARE @RecvReqDlgHandle UNIQUEIDENTIFIER;
DECLARE @RecvReqMsg NVARCHAR(100);
DECLARE @RecvReqMsgName sysname;
BEGIN TRANSACTION;
WAITFOR (RECEIVE TOP (1)
    @RecvReqDlgHandle = conversation_handle,
    @RecvReqMsg = message_body,
    @RecvReqMsgName = message_type_name
  FROM InstTargetQueue), TIMEOUT 60000;
SELECT @RecvReqMsg AS ReceivedRequestMsg;
IF @RecvReqMsgName = N'//Inst/Sample/RequestMessage'
BEGIN
    DECLARE @ReplyMsg NVARCHAR(100);
    SELECT @ReplyMsg = N'<ReplyMsg>A reply for the initiator service.</ReplyMsg>';
    SEND ON CONVERSATION @RecvReqDlgHandle
        MESSAGE TYPE [//Inst/Sample/ReplyMessage] (@ReplyMsg);
    END CONVERSATION @RecvReqDlgHandle;
END
SELECT @ReplyMsg AS SentReplyMsg;
COMMIT TRANSACTION;
GO
"""

END_STEP = """\
-- The initiator receives the reply and ends its side of the conversation.
USE InstInitiatorDB;
GO
DECLARE @RecvReplyMsg NVARCHAR(100);
DECLARE @RecvReplyDlgHandle UNIQUEIDENTIFIER;
BEGIN TRANSACTION;
WAITFOR (RECEIVE TOP (1)
    @RecvReplyDlgHandle = conversation_handle,
    @RecvReplyMsg = message_body
  FROM InstInitiatorQueue), TIMEOUT 60000;
END CONVERSATION @RecvReplyDlgHandle;
SELECT @RecvReplyMsg AS ReceivedReplyMsg;
COMMIT TRANSACTION;
GO
"""


def sql(path, script: str, capsys, monkeypatch) -> str:
    """`pybroker sql FILE -` with the script on stdin; what it printed on stdout."""
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    code, out, err = call(["sql", path, "-"], capsys)
    assert code == 0, err
    return out


@pytest.fixture
def instances(tmp_path):
    """Two instance files, their ports, and their processes (started by the test)."""
    target_port, initiator_port = free_ports(2)
    files = {"target": tmp_path / "target.duckdb", "initiator": tmp_path / "initiator.duckdb"}
    for path in files.values():
        pybroker.connect(path, worker=False).close()
    served = {"target": Served(files["target"], target_port),
              "initiator": Served(files["initiator"], initiator_port)}
    try:
        yield files, {"target": target_port, "initiator": initiator_port}, served
    finally:
        for child in served.values():
            child.close()


def test_the_two_instance_tutorial_completes_through_pybroker_sql(
        tmp_path, capsys, monkeypatch, instances):
    files, ports, served = instances
    certs = tmp_path / "certs"
    certs.mkdir()
    names = {"target": ("Target", "initiator", "Initiator"),
             "initiator": ("Initiator", "target", "Target")}

    def words(who: str, **more: str) -> dict[str, object]:
        Who, other, Other = names[who]
        return {"who": who, "Who": Who, "other": other, "Other": Other, "certs": certs,
                "port": ports[who], "other_port": ports[other], **more}

    for who in ("target", "initiator"):  # each instance's endpoint, before it runs
        sql(files[who], ENDPOINT_STEP.format(**words(who)), capsys, monkeypatch)
        assert (certs / f"{who}_endpoint.cer").read_bytes()[0] == 0x30  # DER
    start_all(*served.values())  # the instance processes: each starts its endpoint

    contracts = {"target": "([//Inst/Sample/Contract])", "initiator": ""}
    for who in ("target", "initiator"):
        sql(files[who], OBJECTS_STEP.format(**words(who, contracts=contracts[who])), capsys,
            monkeypatch)
    sql(files["target"], REFERENCES_STEP.format(**words("target", last=GRANT_SEND)), capsys,
        monkeypatch)
    sql(files["initiator"], REFERENCES_STEP.format(**words("initiator", last=BINDING)),
        capsys, monkeypatch)

    out = sql(files["initiator"], BEGIN_STEP, capsys, monkeypatch)
    assert "<RequestMsg>A request for the target service.</RequestMsg>" in out
    out = sql(files["target"], REPLY_STEP, capsys, monkeypatch)
    assert "<RequestMsg>A request for the target service.</RequestMsg>" in out  # received
    assert "<ReplyMsg>A reply for the initiator service.</ReplyMsg>" in out  # and replied
    out = sql(files["initiator"], END_STEP, capsys, monkeypatch)
    assert "<ReplyMsg>A reply for the initiator service.</ReplyMsg>" in out

    endpoints = "SELECT service_name, far_service, state_desc FROM sys.conversation_endpoints"
    wait_until(lambda: served["target"].sql(endpoints) == [
        ("//Target/Sample/TargetService", "//Initiator/Sample/InitiatorService", "CLOSED")],
        60, "the target's endpoint CLOSED (the initiator's EndDialog arrived)")
    assert served["initiator"].sql(endpoints) == [
        ("//Initiator/Sample/InitiatorService", "//Target/Sample/TargetService", "CLOSED")]
    for child in served.values():  # everything sent was acknowledged
        wait_until(lambda c=child: c.sql("SELECT count(*) FROM sys.transmission_queue") == [
            (0,)], 60, "an empty transmission queue")
    # each admitted the other as the login its certificate's owner connects as
    assert served["target"].sql(
        "SELECT principal_name FROM sys.dm_broker_connections WHERE principal_name IS NOT "
        "NULL LIMIT 1") == [("InitiatorEndpointCert",)]
    assert served["initiator"].sql(
        "SELECT name, remote_service_name, user_name FROM sys.remote_service_bindings") == [
        ("TargetBinding", "//Target/Sample/TargetService", "TargetUser")]
    for child in served.values():
        child.stop()


def test_a_peer_without_connect_on_the_endpoint_is_not_admitted(
        tmp_path, capsys, monkeypatch, instances):
    """The same steps, but the target grants CONNECT to nobody: the initiator's request
    waits in its transmission queue, refused at login, until the grant is given."""
    files, ports, served = instances
    certs = tmp_path / "certs"
    certs.mkdir()
    names = {"target": ("Target", "initiator", "Initiator"),
             "initiator": ("Initiator", "target", "Target")}

    def words(who: str, **more: str) -> dict[str, object]:
        Who, other, Other = names[who]
        return {"who": who, "Who": Who, "other": other, "Other": Other, "certs": certs,
                "port": ports[who], "other_port": ports[other], **more}

    for who in ("target", "initiator"):
        sql(files[who], ENDPOINT_STEP.format(**words(who)), capsys, monkeypatch)
    start_all(*served.values())
    contracts = {"target": "([//Inst/Sample/Contract])", "initiator": ""}
    for who in ("target", "initiator"):
        sql(files[who], OBJECTS_STEP.format(**words(who, contracts=contracts[who])), capsys,
            monkeypatch)
    target_refs = REFERENCES_STEP.format(**words("target", last=GRANT_SEND)).replace(
        "GRANT CONNECT ON ENDPOINT::TargetEndpoint TO InitiatorLogin;", "")
    sql(files["target"], target_refs, capsys, monkeypatch)
    sql(files["initiator"], REFERENCES_STEP.format(**words("initiator", last=BINDING)),
        capsys, monkeypatch)
    sql(files["initiator"], BEGIN_STEP, capsys, monkeypatch)
    wait_until(lambda: served["target"].sql(
        "SELECT count(*) FROM sys.broker_events WHERE event_class = 'Audit Broker Login'")
        != [(0,)], 60, "the target refusing the initiator's login")
    assert served["target"].sql("SELECT count(*) FROM sys.conversation_endpoints") == [(0,)]
    assert served["initiator"].sql("SELECT count(*) FROM sys.transmission_queue") == [(1,)]
    sql(files["target"], "USE master;\nGRANT CONNECT ON ENDPOINT::TargetEndpoint TO "
        "InitiatorLogin;\n", capsys, monkeypatch)
    out = sql(files["target"], REPLY_STEP, capsys, monkeypatch)  # it arrives now
    assert "<RequestMsg>A request for the target service.</RequestMsg>" in out
    for child in served.values():
        child.stop()
