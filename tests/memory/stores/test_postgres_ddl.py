"""Which schema statements the open skips once what they make is there (memory/stores/postgres/ddl.py):
every guarded statement of the store's lists is read for the right name, and a statement the guard
cannot judge always runs. The lock behaviour itself is tested against the server in
test_postgres_schema_locks.py."""

from __future__ import annotations

import re

import pytest

from memory.stores.postgres import changes, claims, schema
from memory.stores.postgres.ddl import made_by, marked

STATEMENTS = (*schema._SCHEMA, *changes.CHANGE_SCHEMA, *schema._CURATION_SCHEMA, *claims._SCHEMA)
_IF_NOT_EXISTS = re.compile(r"(?:ADD COLUMN|TABLE|INDEX) IF NOT EXISTS (\w+)", re.IGNORECASE)


@pytest.mark.parametrize("statement", [s for s in STATEMENTS if _IF_NOT_EXISTS.search(s)])
def test_every_statement_that_makes_something_is_read_for_what_it_makes(statement: str) -> None:
    made = made_by(statement)

    assert made is not None, statement
    named = _IF_NOT_EXISTS.search(statement)
    assert named is not None
    assert named[1] in made  # the column for an added column, else the table or index


def test_an_added_column_names_its_table_and_column() -> None:
    statement = "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS observed_at double precision"

    assert made_by(statement) == ("memory_records", "observed_at")


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE memory_records ADD COLUMN IF NOT EXISTS a text, ADD COLUMN IF NOT EXISTS b text",
        "CREATE TABLE IF NOT EXISTS t (x int); CREATE INDEX IF NOT EXISTS t_x ON t (x)",
        "ALTER TABLE memory_records DROP CONSTRAINT IF EXISTS memory_records_status_check",
        "CREATE OR REPLACE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    ],
)
def test_a_statement_the_guard_cannot_judge_always_runs(statement: str) -> None:
    assert made_by(statement) is None


FUNCTIONS = [s for s in (*STATEMENTS, changes._CHANGED_FUNCTION) if "CREATE OR REPLACE FUNCTION" in s]


@pytest.mark.parametrize("statement", FUNCTIONS)
def test_every_function_is_defined_with_the_mark_of_its_whole_statement(statement: str) -> None:
    function = marked(statement)

    assert function is not None, statement
    name, definition, mark = function
    assert f"FUNCTION {name}(" in statement
    assert definition.replace(f"{mark}\n", "", 1) == statement
    assert definition.rstrip().endswith(f"{mark}\n$$")


def test_a_function_whose_statement_changes_gets_another_mark() -> None:
    [track] = [s for s in FUNCTIONS if "memory_records_track()" in s]
    original = marked(track)
    changed = marked(track.replace("RETURN NEW;", "RETURN NEW; -- changed", 1))

    assert original is not None and changed is not None
    assert changed[2] != original[2]
