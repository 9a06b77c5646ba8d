"""The strict recursive-descent parser that every T-SQL grammar of ``Database.execute()``
shares: a batch of statements, the dispatch of each statement to its grammar by verb and
object kind, names, keywords and the errors that point at the text.

A grammar (pybroker.core.tsql.route_ddl, pybroker.core.tsql.object_parser) is a table of
(verb, object kind) -> function that reads the rest of the statement with the helpers of
:class:`Parser` and returns the statement's dataclass. Anything a grammar does not fully
understand is refused with the line and column where understanding stopped and what was
expected there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from pybroker.core.tsql.lexer import Token
from pybroker.errors import BrokerError, TsqlSyntaxError, UnsupportedStatementError

S = TypeVar("S")
Handler = Callable[["Parser[Any]", Token], S]
# Makes the error for a refused statement from its words and place ("DROP ENDPOINT at
# line 1, column 1").
Refusal = Callable[[str], BrokerError]

# Words that begin a T-SQL statement pybroker does not run: refused as unsupported rather
# than as malformed, and, after a statement, taken as the start of the next statement.
_OTHER_STATEMENT_TEXT = """
    SELECT INSERT UPDATE DELETE MERGE TRUNCATE EXEC EXECUTE DECLARE SET USE PRINT RAISERROR
    THROW IF WHILE BEGIN END COMMIT ROLLBACK SAVE RETURN GRANT REVOKE DENY BACKUP RESTORE DBCC
    WAITFOR SEND RECEIVE MOVE GET ENABLE DISABLE BULK OPEN CLOSE FETCH DEALLOCATE CHECKPOINT
    KILL SHUTDOWN RECONFIGURE BREAK CONTINUE ELSE
"""
_OTHER_STATEMENT_WORDS = frozenset(_OTHER_STATEMENT_TEXT.split())
_VERBS = ("CREATE", "ALTER", "DROP")
# Every word that begins a statement (where a statement read word by word ends).
STATEMENT_WORDS = frozenset((*_VERBS, "GO", *_OTHER_STATEMENT_WORDS))
# How deep blocks, IF, WHILE, parentheses, NOT and chains of operators may nest: deeper
# text is refused where it goes too deep, before parsing or running it could exhaust
# Python's stack (SQL Server refuses such text too, "nested too deeply").
MAX_DEPTH = 100

# SQL Server's reserved keywords: never a name unless [bracketed] or "quoted" (so a
# contract lists the default message type as [DEFAULT], as SQL Server requires).
_RESERVED_TEXT = """
    ADD ALL ALTER AND ANY AS ASC AUTHORIZATION BACKUP BEGIN BETWEEN BREAK BROWSE BULK BY
    CASCADE CASE CHECK CHECKPOINT CLOSE CLUSTERED COALESCE COLLATE COLUMN COMMIT COMPUTE
    CONSTRAINT CONTAINS CONTAINSTABLE CONTINUE CONVERT CREATE CROSS CURRENT CURRENT_DATE
    CURRENT_TIME CURRENT_TIMESTAMP CURRENT_USER CURSOR DATABASE DBCC DEALLOCATE DECLARE DEFAULT
    DELETE DENY DESC DISK DISTINCT DISTRIBUTED DOUBLE DROP DUMP ELSE END ERRLVL ESCAPE EXCEPT
    EXEC EXECUTE EXISTS EXIT EXTERNAL FETCH FILE FILLFACTOR FOR FOREIGN FREETEXT FREETEXTTABLE
    FROM FULL FUNCTION GOTO GRANT GROUP HAVING HOLDLOCK IDENTITY IDENTITY_INSERT IDENTITYCOL IF
    IN INDEX INNER INSERT INTERSECT INTO IS JOIN KEY KILL LEFT LIKE LINENO LOAD MERGE NATIONAL
    NOCHECK NONCLUSTERED NOT NULL NULLIF OF OFF OFFSETS ON OPEN OPENDATASOURCE OPENQUERY
    OPENROWSET OPENXML OPTION OR ORDER OUTER OVER PERCENT PIVOT PLAN PRECISION PRIMARY PRINT
    PROC PROCEDURE PUBLIC RAISERROR READ READTEXT RECONFIGURE REFERENCES REPLICATION RESTORE
    RESTRICT RETURN REVERT REVOKE RIGHT ROLLBACK ROWCOUNT ROWGUIDCOL RULE SAVE SCHEMA
    SECURITYAUDIT SELECT SESSION_USER SET SETUSER SHUTDOWN SOME STATISTICS SYSTEM_USER TABLE
    TABLESAMPLE TEXTSIZE THEN TO TOP TRAN TRANSACTION TRIGGER TRUNCATE TRY_CONVERT TSEQUAL
    UNION UNIQUE UNPIVOT UPDATE UPDATETEXT USE USER VALUES VARYING VIEW WAITFOR WHEN WHERE
    WHILE WITH WITHIN WRITETEXT
"""
RESERVED_WORDS = frozenset(_RESERVED_TEXT.split())

# Object kinds of more than one word, so that a refusal names the whole kind (CREATE
# REMOTE SERVICE BINDING, not CREATE REMOTE). Longest first: SERVICE MASTER KEY before
# SERVICE, which a grammar may take alone.
_KNOWN_PHRASES = (
    "REMOTE SERVICE BINDING", "XML SCHEMA COLLECTION", "SERVICE MASTER KEY",
    "DATABASE ENCRYPTION KEY", "BROKER PRIORITY", "EVENT NOTIFICATION", "MASTER KEY",
)  # fmt: skip


class Parser(Generic[S]):
    """Recursive descent over the tokens; ``pos`` is the token being looked at.

    ``statements`` maps (verb, object kind) to the function reading the rest of such a
    statement; ``refusals`` says why a pair SQL Server itself lacks (ALTER CONTRACT) is
    refused: the reason, or a function that makes the error from the statement's words and
    place (a pair refused only in this context, as ENDPOINT outside master). Every other
    pair is unsupported.
    """

    def __init__(
        self,
        tokens: list[Token],
        statements: Mapping[tuple[str, str], Callable[[Parser[Any], Token], S]],
        refusals: Mapping[tuple[str, str], str | Refusal] | None = None,
    ) -> None:
        self.tokens = tokens
        self.pos = 0
        self.depth = 0  # the nesting being read (``nested``)
        self.lines: list[str] = []  # the script's text, when ordinary SQL is read from it
        self.use_grammar(statements, refusals)

    def use_grammar(
        self,
        statements: Mapping[tuple[str, str], Callable[[Parser[Any], Token], S]],
        refusals: Mapping[tuple[str, str], str | Refusal] | None = None,
    ) -> None:
        """Read what follows with these statements and refusals (after USE master, the
        statements of master)."""
        self.statements = statements
        self.refusals = refusals or {}
        kinds = dict.fromkeys(kind for _, kind in statements)
        self.phrases = sorted(
            {*(k for k in kinds if " " in k), *_KNOWN_PHRASES}, key=lambda p: -len(p.split())
        )
        self.verbs = tuple(dict.fromkeys(verb for verb, _ in statements))
        self.kinds = tuple(kinds)

    # -- tokens --------------------------------------------------------------------------

    @property
    def token(self) -> Token:
        return self.tokens[self.pos]

    def advance(self) -> Token:
        token = self.tokens[self.pos]
        if token.kind != "end":
            self.pos += 1
        return token

    def accept(self, symbol: str) -> bool:
        if self.token.is_symbol(symbol):
            self.advance()
            return True
        return False

    def require(self, symbol: str, what: str) -> None:
        """The symbol, or an error saying ``what`` was expected."""
        if not self.accept(symbol):
            raise self.expected(what)

    def keyword(self, word: str, what: str) -> Token:
        """The keyword ``word`` (any case), or an error saying ``what`` was expected."""
        if not self.token.is_word(word):
            raise self.expected(what)
        return self.advance()

    def choice(self, what: str, *words: str) -> str:
        """One of the keywords ``words``, in upper case."""
        if not self.token.is_word(*words):
            raise self.expected(what)
        return self.advance().text.upper()

    def expected(self, what: str, hint: str = "") -> TsqlSyntaxError:
        t = self.token
        return TsqlSyntaxError(f"expected {what} but found {t.describe()} at {t.where}{hint}")

    @contextmanager
    def nested(self, token: Token, levels: int = 1) -> Iterator[None]:
        """Read ``levels`` more levels of nesting, opened at ``token``; refused past
        MAX_DEPTH."""
        self.deeper(token, levels)
        try:
            yield
        finally:
            self.depth -= levels

    def deeper(self, token: Token, levels: int = 1) -> None:
        """``levels`` more levels of nesting, opened at ``token`` (the caller takes them
        off ``depth`` again); refused past MAX_DEPTH."""
        self.depth += levels
        if self.depth > MAX_DEPTH:
            raise TsqlSyntaxError(
                f"{token.describe()} at {token.where} is nested too deeply: expected at most "
                f"{MAX_DEPTH} levels of blocks, IF, WHILE, parentheses, NOT and operators "
                "in a row")

    def once(self, label: str, token: Token, seen: dict[str, Token], what: str) -> None:
        """Refuse ``label`` given a second time; remember where it was first given."""
        if label in seen:
            raise TsqlSyntaxError(
                f"{label} is given twice (first at {seen[label].where}, again at "
                f"{token.where}): expected each {what} at most once"
            )
        seen[label] = token

    def starts_statement(self) -> bool:
        return self.token.kind == "word" and self.token.text.upper() in STATEMENT_WORDS

    def name(self, what: str) -> str:
        """A name: plain, [bracketed] or "quoted"; never a reserved word, a variable or a
        temporary object (``what`` says whose name, e.g. 'a route name')."""
        t = self.token
        if t.kind == "identifier":
            if not t.text:
                raise self.expected(f"{what} (it must not be empty)")
        elif t.kind != "word" or t.text[0] in "@#":
            raise self.expected(what)
        elif t.text.upper() in RESERVED_WORDS:
            word = t.text.upper()
            raise self.expected(what, f" ({word} is reserved: write [{t.text}] for a name)")
        self.advance()
        return t.text

    # -- a batch of statements -----------------------------------------------------------

    def supported(self) -> str:
        """What execute() runs, from the grammar table: which verbs each kind takes."""
        verbs_of = {kind: "/".join(v for v in self.verbs if (v, kind) in self.statements)
                    for kind in self.kinds}  # fmt: skip
        groups: dict[str, list[str]] = {}
        for kind, verbs in verbs_of.items():
            groups.setdefault(verbs, []).append(kind)
        return "pybroker runs only " + ", and ".join(
            f"{verbs} {_listed(kinds, 'and')}" for verbs, kinds in groups.items()
        )

    @property
    def statement_verbs(self) -> tuple[str, ...]:
        """The verbs of the statements read here, or refused here with a reason of their
        own (BACKUP CERTIFICATE outside master)."""
        return (*self.verbs, *(v for v, _ in self.refusals))

    def statement_kinds(self) -> str:
        """CREATE, ALTER or DROP of the kinds they take (GRANT and BACKUP, which take a
        few, are named by ``supported``)."""
        verbs = [v for v in self.verbs if v in _VERBS]
        kinds = [k for k in self.kinds if any((v, k) in self.statements for v in verbs)]
        return f"{_listed(verbs, 'or')} of a {_listed(kinds, 'or')}"

    def batch(self) -> list[S]:
        statements: list[S] = []
        while True:
            while self.accept(";"):
                pass
            if self.token.kind == "end":
                break
            statements.append(self.statement())
            if self.token.kind == "end" or self.accept(";") or self.starts_statement():
                continue
            raise self.expected("';' or the next statement")
        if not statements:
            end = self.token
            raise TsqlSyntaxError(
                f"the batch holds no statement: expected {self.statement_kinds()} but found "
                f"{end.describe()} at {end.where}"
            )
        return statements

    def statement(self) -> S:
        verb = self.token
        if verb.is_word("GO"):
            raise UnsupportedStatementError(
                f"GO at {verb.where} is not supported: it is a batch separator of client tools "
                "(sqlcmd, SSMS), not T-SQL; expected ';' or the next statement. Pass each batch "
                "on its own"
            )
        if verb.is_word(*_OTHER_STATEMENT_WORDS) and not verb.is_word(
                *self.statement_verbs):  # GRANT and BACKUP: of some kinds
            raise UnsupportedStatementError(
                f"{verb.text.upper()} at {verb.where} is not supported: {self.supported()}"
            )
        if not verb.is_word(*self.statement_verbs):
            raise self.expected(self.statement_kinds())
        self.advance()
        key = (verb.text.upper(), self.kind(verb.text.upper()))
        handler = self.statements.get(key)
        if handler is None:
            refusal = self.refusals.get(key)
            if callable(refusal):  # an error of its own kind (MasterOnlyError)
                raise refusal(f"{' '.join(key)} at {verb.where}")
            raise UnsupportedStatementError(
                f"{' '.join(key)} at {verb.where} is not supported: "
                f"{refusal or self.supported()}"
            )
        return handler(self, verb)

    def kind(self, verb: str) -> str:
        """The object kind after the verb, of one word or of a known phrase (MESSAGE TYPE)."""
        first = self.token
        if first.kind != "word":
            kinds = ", ".join(k for k in self.kinds if (verb, k) in self.statements)
            raise self.expected(f"the kind of object to {verb} ({kinds})")
        for phrase in self.phrases:
            words = phrase.split()
            ahead = self.tokens[self.pos : self.pos + len(words)]
            if len(ahead) == len(words) and all(
                t.is_word(w) for t, w in zip(ahead, words, strict=True)
            ):
                self.pos += len(words)
                return phrase
        word = first.text.upper()
        self.advance()
        if (verb, word) not in self.statements:
            for phrase in self.phrases:
                if phrase.startswith(word + " ") and (verb, phrase) in self.statements:
                    rest = phrase[len(word) + 1 :]
                    raise self.expected(f"{rest} after {word} ({verb} {phrase})")
        return word


def _listed(words: Sequence[str], last: str) -> str:
    """'A, B and C' (or 'A, B or C')."""
    return f"{', '.join(words[:-1])} {last} {words[-1]}" if len(words) > 1 else words[0]
