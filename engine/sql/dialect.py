"""Flink's SQL as sqlglot parses it: the default dialect, extended where Flink's streaming syntax
goes beyond it, so the parser stays sqlglot's own.

- ``TABLE events [PARTITION BY col | (cols)]`` as a window TVF's argument: the default dialect
  reads ``TABLE events, DESCRIPTOR(ts), …`` as a query with a comma join;
- ``WATERMARK FOR ts AS ts - INTERVAL '2' SECOND`` in ``CREATE TABLE`` (RisingWave's parser
  already reads it this way);
- ``SESSION(...)`` as a function (the default tokenizer makes ``SESSION`` a keyword);
- backquoted identifiers, as Flink writes them.
"""

from __future__ import annotations

import logging
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.generator import Generator
from sqlglot.parsers.base import BaseParser
from sqlglot.tokenizer_core import TokenType
from sqlglot.tokens import Tokenizer

from weir.engine.sql.errors import SqlSyntaxError


class TableArgument(exp.Expression):
    """``TABLE name [PARTITION BY …]``, the data argument of a window TVF."""

    arg_types = {"this": True, "partition_by": False}


class _FlinkParser(BaseParser):
    CONSTRAINT_PARSERS = {
        **BaseParser.CONSTRAINT_PARSERS,
        "WATERMARK": lambda self: self.expression(
            exp.WatermarkColumnConstraint(
                this=self._match(TokenType.FOR) and self._parse_column(),
                expression=self._match(TokenType.ALIAS) and self._parse_disjunction(),
            )
        ),
    }
    SCHEMA_UNNAMED_CONSTRAINTS = {*BaseParser.SCHEMA_UNNAMED_CONSTRAINTS, "WATERMARK"}

    # MATCH_RECOGNIZE's ``WITHIN INTERVAL …`` after its PATTERN, which sqlglot does not read:
    # taken where the parser looks for DEFINE, and kept as the node's ``within``
    _pending_within: list[exp.Expr] | None = None

    def _parse_match_recognize(self) -> exp.MatchRecognize | None:
        self._pending_within = []
        try:
            node = super()._parse_match_recognize()
            if node is not None and self._pending_within:
                node.set("within", self._pending_within[0])
            return node
        finally:
            self._pending_within = None

    def _match_text_seq(self, *texts: str, advance: bool = True) -> bool:
        pending = self._pending_within
        if pending is not None and texts == ("DEFINE",) and self._match_text_seq("WITHIN"):
            interval = self._parse_interval()
            if interval is None:
                self.raise_error("Expecting INTERVAL '…' unit after WITHIN", self._curr)
            else:
                pending.append(interval)
        return super()._match_text_seq(*texts, advance=advance)

    def _parse_as_command(self, start: Any) -> exp.Command:
        # sqlglot keeps a statement it cannot parse as an opaque command; weir refuses it at
        # the token where parsing stopped
        self.raise_error(f"cannot parse this {start.text.upper()} statement", self._curr)
        return super()._parse_as_command(start)  # only reached when errors are collected

    def _parse_select_or_expression(self, alias: bool = False) -> exp.Expr | None:
        if not self._is_table_query():
            return super()._parse_select_or_expression(alias)
        self._advance()  # TABLE
        table = self._parse_table_parts()
        partition: list[exp.Expr] | None = None
        if self._match(TokenType.PARTITION_BY):
            if self._match(TokenType.L_PAREN, advance=False):
                partition = self._parse_wrapped_csv(self._parse_column)
            else:
                column = self._parse_column()
                partition = [column] if column is not None else None
        return self.expression(TableArgument(this=table, partition_by=partition))


class _FlinkTokenizer(Tokenizer):
    IDENTIFIERS = ["`", '"']
    KEYWORDS = {k: v for k, v in Tokenizer.KEYWORDS.items() if k != "SESSION"}
    KEYWORDS["MATCH_RECOGNIZE"] = TokenType.MATCH_RECOGNIZE  # engine/sql/recognize.py


class _FlinkGenerator(Generator):
    TRANSFORMS = {
        **Generator.TRANSFORMS,
        TableArgument: lambda self, e: " ".join(
            ["TABLE", self.sql(e, "this")]
            + (
                ["PARTITION BY", ", ".join(self.sql(c) for c in e.args["partition_by"])]
                if e.args.get("partition_by")
                else []
            )
        ),
    }


class WeirFlink(Dialect):
    """The SQL dialect of weir's jobs: Flink's streaming SQL, as far as weir runs it."""

    Tokenizer = _FlinkTokenizer
    Parser = _FlinkParser
    Generator = _FlinkGenerator


def sql(node: exp.Expr) -> str:
    """``node`` as Flink SQL text (for messages and ``weir explain``)."""
    return node.sql(WeirFlink)


class _NoCommandFallback(logging.Filter):
    """sqlglot warns when it keeps an unknown statement as an opaque command; weir refuses such
    a statement with its own message (naming the statement and what a job file holds), so the
    warning would only repeat it, untidily, on stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Falling back to parsing as a 'Command'" not in record.getMessage()


logging.getLogger("sqlglot").addFilter(_NoCommandFallback())


# sqlglot's parser recurses about 18 Python frames per parenthesis and fails near 55 levels;
# weir refuses well before that, with a line naming where, rather than a RecursionError
MAX_NESTING = 32
MAX_SQL_CHARS = 1 << 20  # 1 MiB: a job's SQL is a few statements, never a data file


def parse(text: str, source: str = "<sql>") -> list[exp.Expr]:
    """Every statement of ``text``; a syntax error names ``source``, the line and the column,
    and shows the line with a caret under the offending token.

    Raises:
        SqlSyntaxError: text that does not parse, is longer than ``MAX_SQL_CHARS`` or nests
            parentheses deeper than ``MAX_NESTING``.
    """
    if len(text) > MAX_SQL_CHARS:
        raise SqlSyntaxError(
            f"{source}: the SQL text is {len(text):,} characters, more than weir parses "
            f"({MAX_SQL_CHARS:,}); a job's SQL is its statements, not data",
            1,
            1,
        )
    try:
        _check_nesting(text, source, WeirFlink().tokenize(text))
        statements = sqlglot.parse(text, read=WeirFlink)
    except ParseError as exc:
        first: dict[str, Any] = exc.errors[0] if exc.errors else {}
        raise _syntax_error(text, source, first.get("description") or str(exc), first) from None
    except TokenError as exc:
        raise SqlSyntaxError(f"{source}: SQL syntax error: {exc}", 1, 1) from None
    except RecursionError:
        raise too_deep(source) from None
    return [s for s in statements if s is not None]


def too_deep(source: str) -> SqlSyntaxError:
    """The error for SQL whose expressions nest too deeply for weir to walk."""
    return SqlSyntaxError(
        f"{source}: an expression nests too deeply for weir to compile (a long chain of "
        f"operators, or parentheses past {MAX_NESTING} levels); split it into shorter ones",
        1,
        1,
    )


def _check_nesting(text: str, source: str, tokens: list[Any]) -> None:
    depth = 0
    for token in tokens:
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
            if depth > MAX_NESTING:
                width = max(len(token.text), 1)
                column = max(token.col - width + 1, 1)
                raise SqlSyntaxError(
                    f"{source}:{token.line}:{column}: SQL syntax error: parentheses nest "
                    f"deeper than {MAX_NESTING} levels; split the expression\n"
                    f"{show(text, token.line, column, width)}",
                    token.line,
                    column,
                )
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth = max(depth - 1, 0)


def _syntax_error(text: str, source: str, what: str, where: dict[str, Any]) -> SqlSyntaxError:
    line = int(where.get("line") or 1)
    end_col = int(where.get("col") or 1)  # sqlglot points at the last character of the token
    width = max(len(where.get("highlight") or ""), 1)
    column = max(end_col - width + 1, 1)
    return SqlSyntaxError(
        f"{source}:{line}:{column}: SQL syntax error: {what}\n{show(text, line, column, width)}",
        line,
        column,
    )


def show(text: str, line: int, column: int, width: int = 1) -> str:
    """The ``line`` of ``text`` with carets under ``column`` (both 1-based)."""
    lines = text.splitlines() or [""]
    shown = lines[min(max(line, 1), len(lines)) - 1]
    return f"  {shown}\n  {' ' * (column - 1)}{'^' * max(width, 1)}"


def position(node: exp.Expr) -> tuple[int, int] | None:
    """Where ``node`` starts, as ``(line, column)``, when the parser recorded it (identifiers
    and the columns made of them carry their token's place)."""
    for found in node.walk():
        meta = found.meta if isinstance(found, exp.Identifier) else None
        if meta and "line" in meta and "col" in meta:
            width = len(found.this) if isinstance(found.this, str) else 1
            return int(meta["line"]), max(int(meta["col"]) - width + 1, 1)
    return None
