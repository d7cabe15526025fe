"""How the claim's reads are planned: in the order of the index each one reads, whatever the statistics say."""

from contextlib import contextmanager

from django.db import connection, transaction

from delivery.engine.plumbing.database import in_callers_transaction

# How the claim's reads are planned (`plans_in_index_order`): sorts priced out, and no JIT compilation, which
# those prices would otherwise buy for every read (a second of compiling per statement).
READ_PLANNING = {"enable_sort": "off", "enable_incremental_sort": "off", "jit": "off"}
_SETTINGS = "SELECT " + ", ".join(f"current_setting('{name}')" for name in READ_PLANNING)
_PLAN_READS = "SELECT " + ", ".join(f"set_config('{name}', '{value}', true)" for name, value in READ_PLANNING.items())
_PUT_BACK = "SELECT " + ", ".join(f"set_config('{name}', %s, true)" for name in READ_PLANNING)


@contextmanager
def plans_in_index_order():
    """The claim's reads planned with READ_PLANNING (in a transaction of their own, or the caller's, whose settings
    are put back after them). Each read has a plan that follows its index's order and needs no sort; the others
    read a share's whole backlog (or every pending row) and sort it, and the planner takes one of those whenever its
    statistics say the share is small. Statistics taken while the table was nearly empty (a new install; a quiet
    hour before a flood, until autovacuum analyzes again) said one row for a share of 40,000: each claim then read
    the share's backlog once per endpoint, 180-360 ms per statement instead of 0.3, and a quiet owner beside the
    flood waited 0.7-1.3 s for its claims (docs/benchmarks.md). Sorts are priced out, not forbidden: the reads'
    own ORDER BY of a few rows still sorts. On SQLite (local runs) the reads go as planned."""
    if connection.vendor != "postgresql":
        yield
        return
    nested = in_callers_transaction()
    with transaction.atomic(), connection.cursor() as cursor:
        if nested:
            cursor.execute(_SETTINGS)
            before = cursor.fetchone()
        cursor.execute(_PLAN_READS)
        yield
        if nested:  # (after an error this block's savepoint rolls back, and the settings with it)
            cursor.execute(_PUT_BACK, before)
