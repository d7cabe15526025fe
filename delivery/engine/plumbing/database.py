"""The database as Herald's processes use it beyond one ORM call: acting after the caller's commit, and statements
compiled once per process.

After commit: the one way Herald waits for a transaction before it acts outside it (asks for a pump, wakes the
scheduler, queues a job, sends a signal). Nothing runs for a change that rolled back, and outside a transaction the
action runs at once. An action that fails is logged, never raised into the code whose transaction committed, and the
actions queued after it still run: what it asks for is also found later (the scheduler asks for pumps for due rows,
the reconciler finds lost leases and fan-outs), and a receiver of a signal cannot undo a commit.

Statements: Django builds and compiles a queryset's SQL on every call, about 0.6 ms of CPU, most of what a simple
query costs the process. The paths that run thousands of times a second (authenticating a request, a publish's
topic, catalog and subscriptions) write their queryset once as a `Statement`, which Django compiles on first use;
later calls run the same SQL with other values, through Django's cursor (its wrappers, error translation and
reconnection apply), and convert the columns as the ORM would. `insert` is `bulk_create` for new rows, its SQL
written without Django's insert compiler.

Bound statements: Django's psycopg cursor quotes every parameter into the statement's text in Python (a tenth of a
worker's time when it wrote back 32 deliveries' changes). `bound_cursor()` is Django's cursor over psycopg's server-
side binding instead: the values travel beside the statement, dumped in C. A statement of the worker's hot path
takes arrays (`= ANY(%s)`, `unnest(…)`, `AnyOf` below), so that its text does not depend on how many rows it is
given. (It is not prepared: Django leaves psycopg's preparing off unless the database's OPTIONS set
prepare_threshold.)
"""

import logging
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from functools import cache
from importlib import import_module

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import (
    AutoField,
    BigIntegerField,
    CharField,
    DateTimeField,
    IntegerField,
    Lookup,
    Model,
    PositiveBigIntegerField,
    PositiveIntegerField,
    PositiveSmallIntegerField,
    QuerySet,
    SmallIntegerField,
    TextField,
    URLField,
    signals,
)
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query import ModelIterable, ValuesListIterable
from django.db.models.query_utils import DeferredAttribute

log = logging.getLogger(__name__)


def _optional(name: str):
    """A module, or None where it cannot be imported: psycopg (3 or 2) is the `postgres` extra, and a project on
    SQLite runs without it."""
    try:
        return import_module(name)
    except ImportError:
        return None


psycopg_any = _optional("django.db.backends.postgresql.psycopg_any")
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
def bound_cursor(using: str = DEFAULT_DB_ALIAS):
    """Django's cursor (its execute wrappers, query log and error translation) over psycopg's server-side binding
    cursor on PostgreSQL with psycopg 3; elsewhere Django's usual cursor."""
    connection = connections[using]
    if not on_psycopg3(connection):
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = connection.Database.Cursor(connection.connection)
    _load_times(raw, connection)
    with connection._prepare_cursor(raw) as cursor:
        yield cursor


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


# Django's own fields whose `get_db_prep_save` returns a value of this type unchanged on PostgreSQL (exactly these
# classes: a subclass may prepare its values otherwise, an encrypted field say).
PLAIN_FIELDS = {CharField: str, URLField: str, TextField: str, IntegerField: int, BigIntegerField: int,
                SmallIntegerField: int, PositiveIntegerField: int, PositiveSmallIntegerField: int,
                PositiveBigIntegerField: int, DateTimeField: datetime}


def preparer(field, connection) -> Callable:
    """What `field.get_db_prep_save(value, connection)` does to a value, without its calls where it would return
    the value itself: None, or exactly a `str` for a text field, an `int` for an integer field, an aware
    `datetime` for a date-time field, on PostgreSQL. (A quarter of writing back a claim's changes was those calls.)
    An integer stays a plain `int`, where Django names its size for psycopg (Int4): the statements that use this
    cast their parameters, or COPY them as text. Made once per statement, called once per value."""
    connection = connections[connection.alias]  # not the proxy: each attribute of it is a lookup
    kind = PLAIN_FIELDS.get(type(field)) if connection.vendor == "postgresql" else None
    save = field.get_db_prep_save
    if kind is None:
        return lambda value: save(value, connection)
    if kind is datetime:
        return lambda value: (value if value is None or (type(value) is datetime and value.tzinfo is not None)
                              else save(value, connection))
    # an integer is a plain `int` either way: an array of them cannot mix it with Django's Int4
    return lambda value: value if value is None or type(value) is kind else _plain(save(value, connection))


def _plain(value):
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value


# Values no caller passes, one per parameter, by kind; each must reach the compiled SQL unchanged, exactly where
# the caller's value will go. Integers stay inside PostgreSQL's integer range (Django turns a lookup with a value
# out of its column's range into no query at all).
SAMPLE_INT = -2_147_000_000
SAMPLE_TEXT = "\x1fherald statement parameter {}\x1f"
KINDS = (int, str, list)  # a list: the values of an `AnyOf`


class Statement:
    """A queryset compiled once per process, run again with other values.

        by_name = Statement(lambda owner, name: Topic.objects.filter(owner_id=owner, name=name)[:1], int, str)
        by_name.rows(7, "orders")   # [Topic] (instances for a queryset of instances, tuples for values_list)

    `build` is called once with a sample for each parameter (`int`, `str`, or `list` for an `AnyOf`'s
    values) and returns the queryset; each sample
    must reach the SQL as a parameter of its own, unchanged (a lookup that transforms its value, like `__icontains`,
    is refused when the statement is compiled, and so is a queryset with `select_related`, `only`, `defer`,
    annotations or prefetching, or one of `values()` or flat tuples). An `__in` takes one value per sample: a
    statement has a fixed shape, so callers keep one per arity they use. A column whose values are not `int` or
    `str` (a host project's user model keyed by UUID) is asked through the ORM by the caller instead. `bound`: run
    through `bound_cursor()` (the worker's statements; the values of a list then go as one array)."""

    def __init__(self, build: Callable[..., QuerySet], *kinds: type, using: str = DEFAULT_DB_ALIAS,
                 bound: bool = False):
        if any(kind not in KINDS for kind in kinds):
            raise TypeError("a Statement's parameters are int, str or list")
        self.build, self.kinds, self.using, self.bound = build, kinds, using, bound
        self._compiled = None

    def rows(self, *values) -> list:
        if len(values) != len(self.kinds):
            raise TypeError(f"this statement takes {len(self.kinds)} values, not {len(values)}")
        sql, slots, converters, model, names = self._compiled or self._compile()
        params = [values[slot] if isinstance(slot, int) else slot[0] for slot in slots]
        connection = connections[self.using]
        with bound_cursor(self.using) if self.bound else connection.cursor() as cursor:
            cursor.execute(sql, params)
            found = cursor.fetchall()
        if converters:
            found = [_converted(row, converters, connection) for row in found]
        if model is not None:
            return instances(model, self.using, names, found)
        return found

    def _compile(self):
        samples = [SAMPLE_INT - n if kind is int else [SAMPLE_INT - n] if kind is list else SAMPLE_TEXT.format(n)
                   for n, kind in enumerate(self.kinds)]
        queryset = self.build(*samples)
        model, names = None, None
        if queryset._iterable_class not in (ModelIterable, ValuesListIterable):
            raise ValueError("a Statement returns instances or values_list's tuples")
        if queryset._iterable_class is ModelIterable:
            query = queryset.query
            if (query.select_related or query.deferred_loading != (frozenset(), True) or query.annotation_select
                    or queryset._prefetch_related_lookups):
                raise ValueError("a Statement of instances reads every column of one model, and nothing else")
            model = queryset.model
            names = [field.attname for field in model._meta.concrete_fields]
            queryset = queryset.values_list(*names)
        compiler = queryset.query.get_compiler(self.using)
        sql, params = compiler.as_sql()
        slots, seen = [], set()
        for param in params:
            hits = [n for n, sample in enumerate(samples) if type(param) is type(sample) and param == sample]
            slots.append(hits[0] if hits else (param,))
            seen.update(hits)
        if seen != set(range(len(samples))):
            missing = sorted(set(range(len(samples))) - seen)
            raise ValueError(f"parameters {missing} do not reach the SQL unchanged: {sql}")
        converters = compiler.get_converters([column[0] for column in compiler.select[:compiler.col_count]])
        self._compiled = (sql, slots, list(converters.items()), model, names)
        return self._compiled


def _converted(row, converters, connection) -> tuple:
    row = list(row)
    for position, (functions, expression) in converters:
        value = row[position]
        for function in functions:
            value = function(value, expression, connection)
        row[position] = value
    return tuple(row)


def instances(model: type[Model], using: str, names: list[str], rows: list) -> list[Model]:
    """`[model.from_db(using, names, row) for row in rows]`, the rows holding every concrete field in order. Where
    nothing can tell the difference, without `Model.__init__` for each row (a third of a claim's time in Python was
    building its rows' instances): the model keeps Django's `__init__` and `from_db`, each of its fields is read
    and written through Django's plain attributes, and no receiver listens for the model's `pre_init` or
    `post_init` (an `ImageField`'s dimensions, a host project's signal)."""
    if (not _plain_model(model, tuple(names)) or signals.pre_init.has_listeners(model)
            or signals.post_init.has_listeners(model)):
        return [model.from_db(using, names, row) for row in rows]
    made, new, state_of = [], model.__new__, ModelState
    for row in rows:
        obj = new(model)
        state = obj._state = state_of()
        state.adding, state.db = False, using
        obj.__dict__.update(zip(names, row, strict=True))
        made.append(obj)
    return made


@cache
def _plain_model(model: type[Model], names: tuple[str, ...]) -> bool:
    fields = model._meta.concrete_fields
    return (model.__init__ is Model.__init__ and model.from_db.__func__ is Model.from_db.__func__
            and names == tuple(field.attname for field in fields)
            and all(type(model.__dict__.get(name)) in (DeferredAttribute, ForeignKeyDeferredAttribute)
                    for name in names))


def instance(statement: Statement, *values) -> Model | None:
    """The first instance (or row) a statement finds, or None."""
    found = statement.rows(*values)
    return found[0] if found else None


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
            connection.cursor() as cursor:
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
    with connection.cursor() as cursor:
        cursor.execute(f"WITH {connection.ops.quote_name('herald_first')} AS ({parent_sql}) {child_sql}",
                       parent_values + child_values)
        children.keys_read(0, cursor.fetchall() if not children.chosen else [])
    parents.written()
    children.written()
    return True
