"""Errors of the SQL front end, under ``JobDefinitionError`` (exit 2 from the command line):

JobDefinitionError
└── SqlError               a SQL job weir cannot run: the message names the construct
    ├── SqlSyntaxError     text that does not parse: line, column and a caret under it
    └── SqlUnsupported     valid SQL that weir refuses rather than run with another meaning
"""

from __future__ import annotations

from weir.base.errors import JobDefinitionError


class SqlError(JobDefinitionError):
    """A SQL job weir cannot run; the message names the statement's construct and the fix."""


class SqlSyntaxError(SqlError):
    """SQL that does not parse; ``line`` and ``column`` are 1-based."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class SqlUnsupported(SqlError):
    """A construct weir does not run (a join, ORDER BY on a stream, an aggregation without a
    window): refused, never run with a different meaning."""
