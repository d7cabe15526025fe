"""The built-in delivery policies, as docs/policies.md states them ("Presets"): each preset's limits and its
schedule, attempt by attempt, computed here as the policy preview computes them (`parse(name).schedule()`, without
jitter) and compared with the tables cell by cell, so that a changed preset, or a hand-edited table, fails."""

import re
from pathlib import Path

import pytest

from delivery.rules.backoff import human
from delivery.rules.policy import DeliveryPolicy, parse
from delivery.rules.presets import PRESETS

POLICIES_MD = Path(__file__).resolve().parents[3] / "docs" / "policies.md"
ELIDED = ("…", "…", "…")  # a table may leave out the middle of a long schedule, never its first or last rows


def documented() -> dict[str, tuple[str, list[tuple[str, ...]]]]:
    """Each `### \\`name\\`` of the Presets section: (its limits line, its table's rows as cell texts)."""
    section = POLICIES_MD.read_text().split("\n## Presets\n", 1)[1].split("\n## ", 1)[0]
    found = {}
    for part in re.split(r"^### ", section, flags=re.MULTILINE)[1:]:
        heading, _, body = part.partition("\n")
        lines = body.splitlines()
        limits = next(line for line in lines if line.startswith("max attempts:"))
        rows = [tuple(cell.strip() for cell in line.strip().strip("|").split("|")) for line in lines
                if line.startswith("| ") and not line.startswith("| attempt ")]
        found[heading.strip().strip("`")] = (limits, rows)
    return found


DOCUMENTED = documented()


def limits_line(policy: DeliveryPolicy) -> str:
    codes = sorted(policy.permanent_failure_codes)
    return (f"max attempts: {policy.max_attempts or 'until the time-to-live'}; "
            f"time-to-live: {f'{policy.max_age_seconds:g} s' if policy.max_age_seconds else 'none'}; "
            f"jitter: ±{policy.jitter * 100:g} %; permanent failure codes: {codes or 'none'}")


def table(policy: DeliveryPolicy, shown: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The policy's schedule as the table's cells, with the documented table's cut if it has one."""
    rows = [(str(row["attempt"]), f"{row['delay']:g}", human(row["offset"])) for row in policy.schedule()]
    if ELIDED not in shown:
        return rows
    head = shown.index(ELIDED)
    tail = len(shown) - head - 1
    return [*rows[:head], ELIDED, *rows[len(rows) - tail:]]


def test_every_preset_is_documented_and_only_those():
    assert list(DOCUMENTED) == list(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_documented_limits_are_its_own(name):
    assert DOCUMENTED[name][0] == limits_line(parse(name))


@pytest.mark.parametrize("name", PRESETS)
def test_a_presets_documented_schedule_is_the_one_it_makes(name):
    shown = DOCUMENTED[name][1]
    assert shown.count(ELIDED) <= 1
    assert shown == table(parse(name), shown)


def test_the_tables_are_read_as_written():
    """The reading above, pinned on one preset, so that a reader that found nothing could not pass."""
    limits, rows = DOCUMENTED["event-grid"]
    assert limits == ("max attempts: 30; time-to-live: 86400 s; jitter: ±10 %; permanent failure codes: "
                      "[400, 401, 403, 413]")
    assert rows[0] == ("1", "0", "0 s")
    assert rows[-1] == ("11", "43200", "22.8 h")
    assert len(rows) == 11
    assert DOCUMENTED["sns-customer-managed"][1][8:] == [ELIDED, ("49", "600", "6.3 h"), ("50", "600", "6.5 h"),
                                                         ("51", "600", "6.6 h")]
