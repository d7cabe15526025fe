"""Shortcuts through the framework's internals, in one place: each does what Django or DRF does, without work whose
result nobody can tell apart, on a path that runs thousands of times a second. Each is here because a benchmark
showed its cost (docs/benchmarks.md, "CPU per delivery and per publish"), and each falls back to the framework
itself wherever it cannot tell that nothing differs.

- `Statement`: a queryset compiled once per process and run again with other values. Django builds and compiles a
  queryset's SQL on every call, ~0.6 ms of CPU, most of what a simple query costs (authenticating a request, a
  publish's topic, catalog and subscriptions, a claim's loads: "The publish cut", "the claim's loads" 9 %).
- `instances`: model instances built without `Model.__init__` where nothing can tell (a third of a claim's Python
  time was building its rows: "The last cut", "the claim's instances").
- `preparer`: a field's `get_db_prep_save` skipped where it would return the value itself (a quarter of writing
  back a claim's changes).
- `SharedFields`: a publish body's DRF fields built once per thread instead of deep-copied per request (~0.3 ms of
  the web process's CPU per publish: "The last cut").
(`database.insert`, a write of new rows without Django's insert compiler, is database.py's.)
"""

import threading
from collections.abc import Callable
from datetime import datetime
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import (
    BigIntegerField,
    CharField,
    DateTimeField,
    IntegerField,
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

from delivery.engine.plumbing.database import bound_cursor

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
    `str` (a host project's user model keyed by UUID) is asked through the ORM by the caller instead. It runs
    through `bound_cursor()`: its values travel beside it (a list's as one array), and PostgreSQL plans it once per
    connection (db_config.PREPARE_AFTER_USES). `bound=False`: through Django's usual cursor instead."""

    def __init__(self, build: Callable[..., QuerySet], *kinds: type, using: str = DEFAULT_DB_ALIAS,
                 bound: bool = True):
        if any(kind not in KINDS for kind in kinds):
            raise TypeError("a Statement's parameters are int, str or list")
        self.build, self.kinds, self.using, self.bound = build, kinds, using, bound
        self._compiled = None

    def rows(self, *values) -> list:
        if len(values) != len(self.kinds):
            raise TypeError(f"this statement takes {len(self.kinds)} values, not {len(values)}")
        sql, slots, *_ = self._compiled or self._compile()
        params = [values[slot] if isinstance(slot, int) else slot[0] for slot in slots]
        with bound_cursor(self.using) if self.bound else connections[self.using].cursor() as cursor:
            cursor.execute(sql, params)
            return self.loaded(cursor.fetchall())

    def loaded(self, found: list) -> list:
        """What `rows` returns for `found`, rows of this statement's columns that another statement selected (by
        `columns`): Django's converters applied to each value, instances built for a statement of instances."""
        _, _, converters, model, names = self._compiled or self._compile()
        if converters:
            connection = connections[self.using]
            found = [_converted(row, converters, connection) for row in found]
        if model is not None:
            return instances(model, self.using, names, found)
        return found

    def columns(self, alias: str) -> list[str]:
        """The columns a statement of instances reads, in its order, as `alias.column` for another statement."""
        _, _, _, model, _ = self._compiled or self._compile()
        quote = connections[self.using].ops.quote_name
        return [f"{alias}.{quote(field.column)}" for field in model._meta.concrete_fields]

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


# --- DRF fields built once per thread ------------------------------------------------------------------------------
# DRF gives each serializer instance its own fields: `Serializer.fields` deep-copies the declared ones, and a field's
# deep copy is the field built again from its arguments. A serializer class with `SharedFields` first in its bases
# reads its fields from one instance per thread and class, built without data (the template): bound to the template,
# they validate any instance's data the same way, since what a field reads during validation is its own arguments,
# its name and its root's `partial` and `context`, which are the template's (not partial, no context). An instance
# asked to be partial or given a context builds its own fields, as DRF does. Field-level `validate_<name>` methods
# and the serializer's own validators are still the instance's. Fields are never changed after binding, so sharing
# them within a thread is safe; threads do not share.

_templates = threading.local()


class SharedFields:
    """A serializer mixin (before `serializers.Serializer` in the bases): fields shared per thread and class."""

    @property
    def fields(self):
        if self.partial or self._context:
            return self._own_fields
        templates = _templates.__dict__.setdefault("by_class", {})
        template = templates.get(type(self))
        if template is None:
            template = templates[type(self)] = type(self)()
        return template._own_fields

    @property
    def _own_fields(self):
        """DRF's `fields`: this instance's own deep copy, made once."""
        own = self.__dict__.get("_herald_own_fields")
        if own is None:
            own = self.__dict__["_herald_own_fields"] = super().fields
        return own
