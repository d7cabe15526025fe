"""The database as Herald's processes use it beyond one ORM call: acting after the caller's commit, bound cursors,
and new rows in one statement.

After commit: the one way Herald waits for a transaction before it acts outside it (asks for a pump, wakes the
scheduler, queues a job, sends a signal). Nothing runs for a change that rolled back, and outside a transaction the
action runs at once. An action that fails is logged, never raised into the code whose transaction committed, and the
actions queued after it still run: what it asks for is also found later (the scheduler asks for pumps for due rows,
the reconciler finds lost leases and fan-outs), and a receiver of a signal cannot undo a commit.

`insert` is `bulk_create` for new rows, its SQL written without Django's insert compiler (the other shortcuts
through Django's internals, statements compiled once per process among them, are shortcuts.py's).

Bound statements: Django's psycopg cursor quotes every parameter into the statement's text in Python (a tenth of a
worker's time when it wrote back 32 deliveries' changes). `bound_cursor()` is Django's cursor over psycopg's server-
side binding instead: the values travel beside the statement, dumped in C. A statement of the worker's hot path
takes arrays (`= ANY(%s)`, `unnest(…)`, `AnyOf` below), so that its text does not depend on how many rows it is
given. It is prepared server-side after db_config.PREPARE_AFTER_USES uses on a connection, so PostgreSQL plans it
once per connection (never behind PgBouncer, where `DATABASE_POOLER=pgbouncer` turns preparing off).
"""

import logging
from contextlib import contextmanager, nullcontext
from datetime import UTC
from functools import cache

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.models import (
    AutoField,
    Lookup,
    Model,
)

log = logging.getLogger(__name__)
# A prepared statement that no longer holds: "cached plan must not change result type", "prepared statement … does
# not exist".
STALE_PREPARED = {"0A000", "26000"}


try:  # psycopg (3 or 2) is the `postgres` extra: a project on SQLite runs without it
    from django.db.backends.postgresql import psycopg_any
except ImportError:
    psycopg_any = None
# psycopg's own (C) loader of a timestamptz in text, when psycopg 3 is installed
PSYCOPG3 = psycopg_any is not None and psycopg_any.is_psycopg3
TIMESTAMPTZ = psycopg_any.adapters.types["timestamptz"].oid if PSYCOPG3 else None
_C_TIMESTAMPTZ = psycopg_any.adapters.get_loader(TIMESTAMPTZ, 0) if PSYCOPG3 else None  # 0: text


def after_commit(action, *args, **kwargs) -> None:
    """Run `action(*args, **kwargs)` once the caller's transaction commits."""
    def run():
        try:
            action(*args, **kwargs)
        except Exception:
            log.exception("after a commit, %s failed", getattr(action, "__qualname__", repr(action)))
    transaction.on_commit(run)


def in_callers_transaction(using: str = DEFAULT_DB_ALIAS) -> bool:
    """Whether a statement now runs inside a transaction the caller opened (an atomic block, or Django's manual
    transaction mode), which Herald's own work must not commit, end or leave changed."""
    connection = connections[using]
    return connection.in_atomic_block or not connection.get_autocommit()


def on_psycopg3(connection) -> bool:
    """PostgreSQL through psycopg 3: where server-side binding, binary parameters and COPY rows are there."""
    return connection.vendor == "postgresql" and connection.Database.__name__ == "psycopg"


@contextmanager
def bound_cursor(using: str = DEFAULT_DB_ALIAS, *, prepared: bool = True):
    """Django's cursor (its execute wrappers, query log and error translation) over psycopg's server-side binding
    cursor on PostgreSQL with psycopg 3; elsewhere Django's usual cursor. `prepared=False`: its statements are not
    prepared, so each run is parsed and planned anew (a plan for any values, db_config.PLANNED_ONCE, but made from
    the statistics of the moment).

    A prepared statement the server can no longer run as it was prepared (a migration changed the columns it reads,
    or the statement is gone: a pooler's other session) fails with its error, and the connection is closed, so that
    the next statement starts on a fresh one instead of failing the same way until the connection ages out."""
    connection = connections[using]
    if not on_psycopg3(connection):
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    kept = connection.__dict__.setdefault("_herald_bound_cursors", {})
    raw = kept.pop(prepared, None)  # (taken while in use: a block inside another's makes its own)
    if raw is None or raw.closed or raw.connection is not connection.connection:
        with connection.wrap_database_errors:
            raw = _bound(connection.Database.Cursor, prepared)(connection.connection)
        _load_times(raw, connection)
    try:
        yield connection._prepare_cursor(raw)
    except DatabaseError as exc:
        if getattr(exc.__cause__, "sqlstate", None) in STALE_PREPARED:
            connection.close()
        raise
    finally:
        if prepared in kept:
            raw.close()
        else:  # kept for the connection's next statement: making a cursor was a third of a short one's cost
            kept[prepared] = raw


@cache
def _bound(cursor_class, prepared: bool):
    class BoundCursor(cursor_class):
        """psycopg's server-side binding cursor; its statements never prepared unless `prepared`. It keeps the
        statement it ran for Django's query log (psycopg does not when it runs a prepared one)."""

        def execute(self, query, params=None, *, prepare=None, binary=None):
            return super().execute(query, params, prepare=None if prepared else False, binary=binary)

        def _send_query_prepared(self, name, pgq, *, binary=None):
            self._query = pgq
            return super()._send_query_prepared(name, pgq, binary=binary)

    return BoundCursor


def _load_times(cursor, connection) -> None:
    """Date-times as Django's cursor loads them: in the connection's time zone. Django's loader for them is
    psycopg's Python one, then a `replace(tzinfo=…)` (4 % of a worker's time to slow receivers); where the
    connection's zone and the session's are both UTC, psycopg's C loader returns the same value (its zone is the
    session's: `timezone.utc` for UTC)."""
    if connection.timezone is UTC and connection.connection.info.parameter_status("TimeZone") == "UTC":
        cursor.adapters.register_loader("timestamptz", _C_TIMESTAMPTZ)
    else:  # what Django's create_cursor does
        loader = connection.connection.adapters.get_loader(TIMESTAMPTZ, 0)
        if getattr(loader, "timezone", None) != connection.timezone:
            psycopg_any.register_tzloader(connection.timezone, cursor)


class AnyOf(Lookup):
    """`AnyOf(F("pk"), values)` in a filter: `pk = ANY(%s)` with the values as one array parameter (PostgreSQL), so
    that the statement is the same whatever their number. The values go to the database as they are (no field's
    `get_prep_value`): keys read from rows, in the types the database gave them. Used as an expression, not
    registered as a lookup, so that no filter a user can write (an admin page's query string) reaches it."""

    lookup_name = "any_of"
    prepare_rhs = False

    def get_db_prep_lookup(self, value, connection):
        return "%s", [list(value)]

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} = ANY({rhs})", [*lhs_params, *rhs_params]


def array_parameter(using: str = DEFAULT_DB_ALIAS) -> str:
    """The placeholder of an array parameter in a `bound_cursor()` statement: binary (`%b`) with psycopg 3, whose
    text form of an array is written in Python (906 µs for nine columns of 32 values, 154 µs in binary); `%s`
    elsewhere."""
    return "%b" if on_psycopg3(connections[using]) else "%s"


class _Insert:
    """New rows of one model as an INSERT: each field's value prepared as the ORM prepares it (`pre_save`,
    `get_db_prep_save`). `rows` is None where the objects need `bulk_create` itself (a value the database computes:
    an expression, a database default; keys chosen by a database that cannot return them from a multi-row insert)."""

    def __init__(self, objects: list[Model], connection):
        self.objects, self.connection = objects, connection
        self.model = model = type(objects[0])
        meta = model._meta
        self.chosen = chosen = objects[0].pk is not None
        if any((obj.pk is not None) != chosen or type(obj) is not model for obj in objects):
            raise ValueError("insert() writes new rows of one model, all with a primary key or all without one")
        self.rows = None
        if not chosen and not connection.features.can_return_rows_from_bulk_insert:
            return
        self.fields = fields = [field for field in meta.concrete_fields
                                if not field.generated and (chosen or not isinstance(field, AutoField))]
        rows = []
        for obj in objects:
            obj._prepare_related_fields_for_save(operation_name="bulk_create")
            values = [field.pre_save(obj, True) for field in fields]
            if any(hasattr(value, "resolve_expression") for value in values):
                return
            rows.append([field.get_db_prep_save(value, connection=connection) for field, value in zip(
                fields, values, strict=True)])
        self.rows = rows

    def batch_size(self, most: int) -> int:
        return max(1, min(most, self.connection.ops.bulk_batch_size(self.fields, self.objects)))

    def sql(self, start: int, stop: int, *, returning: bool = True) -> tuple[str, list]:
        """The INSERT of rows[start:stop] and its parameters; with `returning`, the keys the database chose."""
        quote = self.connection.ops.quote_name
        one = f"({', '.join(['%s'] * len(self.fields))})"
        batch = self.rows[start:stop]
        tail = f" RETURNING {quote(self.model._meta.pk.column)}" if returning and not self.chosen else ""
        return (f"INSERT INTO {quote(self.model._meta.db_table)} ({', '.join(quote(f.column) for f in self.fields)}) "
                f"VALUES {', '.join([one] * len(batch))}{tail}", [value for row in batch for value in row])

    def keys_read(self, start: int, found: list) -> None:
        if not self.chosen:
            for obj, (key,) in zip(self.objects[start:start + len(found)], found, strict=True):
                setattr(obj, self.model._meta.pk.attname, key)

    def written(self) -> list[Model]:
        for obj in self.objects:
            obj._state.adding = False
            obj._state.db = self.connection.alias
        return self.objects


USUAL_ROWS = 8  # what an INSERT the usual publish makes writes after its one row (`usual_shape`)


def usual_shape(first: int, *then: int) -> bool:
    """Whether an INSERT of `first` rows (and `then` rows of the models after it, in one statement) is prepared:
    one row, and at most USUAL_ROWS after it, the shapes that repeat (a publish of one message to a few
    subscriptions). Each count of rows is a statement of its own, and so is each set of parameter types (an int
    goes as int2, int4 or int8 by its size): prepared, larger shapes would crowd out the statements psycopg keeps
    prepared on a connection (100), and a batch's plan for thousands of parameters would stay in the server's
    memory. They are bound server-side all the same, and planned for their run."""
    return first == 1 and all(count <= USUAL_ROWS for count in then)


def insert(objects: list[Model], *, batch_size: int = 1000, using: str = DEFAULT_DB_ALIAS) -> list[Model]:
    """`bulk_create(objects)` for new rows of one model (all with a primary key chosen in Python, or all without
    one): one INSERT per batch (within the database's limit of parameters), all of them in one transaction (one
    statement needs none), the primary keys the database chose set on the objects. Objects with a value the
    database computes (an expression, a database default), and a database that cannot return the keys of a
    multi-row insert, go through `bulk_create` itself."""
    if not objects:
        return objects
    connection = connections[using]
    plan = _Insert(objects, connection)
    if plan.rows is None:
        return plan.model._default_manager.db_manager(using).bulk_create(objects, batch_size=batch_size)
    size = plan.batch_size(batch_size)
    one_statement = len(objects) <= size
    with (nullcontext() if one_statement else transaction.atomic(using=using, savepoint=False)), \
            bound_cursor(using, prepared=usual_shape(len(objects))) as cursor:
        for start in range(0, len(objects), size):
            cursor.execute(*plan.sql(start, start + size))
            if not plan.chosen:
                plan.keys_read(start, cursor.fetchall())
    return plan.written()


def insert_together(first: list[Model], then: list[Model], *, most: int = 1000,
                    using: str = DEFAULT_DB_ALIAS) -> bool:
    """`insert(first)` and `insert(then)` as one statement (`WITH … AS (INSERT …) INSERT …`), which is atomic
    without a transaction: a publish outside one then costs no BEGIN and COMMIT (two round trips, and the web
    process's and PostgreSQL's CPU for them) and one INSERT fewer. `first` has its keys chosen in Python (`then`
    may refer to it); `then` gets the keys the database chose. PostgreSQL checks `then`'s foreign keys at the end
    of the statement, when `first`'s rows are there.

    Returns False, having written nothing, where one statement will not do: not PostgreSQL, either list empty or
    over `most` rows, `first`'s keys not chosen, or objects that need `bulk_create`. The caller then writes them
    its usual way."""
    connection = connections[using]
    if connection.vendor != "postgresql" or not first or not then or len(first) > most or len(then) > most:
        return False
    parents, children = _Insert(first, connection), _Insert(then, connection)
    if not parents.chosen or parents.rows is None or children.rows is None or \
            parents.batch_size(most) < len(first) or children.batch_size(most) < len(then):
        return False
    (parent_sql, parent_values), (child_sql, child_values) = parents.sql(0, len(first)), children.sql(0, len(then))
    with bound_cursor(using, prepared=usual_shape(len(first), len(then))) as cursor:
        cursor.execute(f"WITH {connection.ops.quote_name('herald_first')} AS ({parent_sql}) {child_sql}",
                       parent_values + child_values)
        children.keys_read(0, cursor.fetchall() if not children.chosen else [])
    parents.written()
    children.written()
    return True
