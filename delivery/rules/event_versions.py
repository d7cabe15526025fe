"""Event versions (pure; docs/versions.md): which version an event is published in, which one an endpoint receives,
and the down-converters between them.

An event type's versions have names that sort in the order they came (dates: `2026-11-01`). A publish names the
version its payload is in (default: the latest). A subscription pins a version name: it receives each event in the
newest version of the event's type that is not after its pin (the oldest, if every version is after it); an empty
pin is the latest. Each version but the oldest has a down-converter, turning a payload of it into one of the
version before it; an event is brought down one version at a time. An event published in a version older than the
one its endpoint would receive is delivered as it was published (there are no up-converters), saying its version.
"""

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Version:
    name: str
    down_converter: str = ""  # JavaScript handler(webhook): this version's payload into the one before it


def latest(names: Sequence[str]) -> str:
    """The latest of a type's version names ("" when it has none)."""
    return max(names, default="")


def received(names: Sequence[str], pin: str) -> str:
    """The version an endpoint pinned at `pin` receives of a type with versions `names` ("" when it has none)."""
    if not names:
        return ""
    if not pin:
        return max(names)
    return max((name for name in names if name <= pin), default=min(names))


def published_problem(names: Sequence[str], asked: str | None, event_type: str) -> str | None:
    """Why a publish may not name `asked` as its payload's version (None: it may, or names none)."""
    if asked is None or asked == "":
        return None
    if not names:
        return f"the event type {event_type!r} has no versions in the catalog"
    if asked not in names:
        shown = ", ".join(sorted(names)[-5:])
        return f"{asked!r} is not a version of {event_type!r} (its versions: {shown})"
    return None


def down_steps(versions: Sequence[Version], published: str, target: str) -> tuple[tuple[str, str], ...]:
    """The down-converters that bring a payload of version `published` to `target`, in the order they run: each
    version after `target` up to `published`, newest first, as (step name, code)."""
    if not published or not target or target >= published:
        return ()
    chain = sorted((v for v in versions if target < v.name <= published), key=lambda v: v.name, reverse=True)
    return tuple((f"down-converter of {v.name}", v.down_converter) for v in chain)


def new_version_problem(names: Sequence[str], name: str, down_converter: str) -> dict[str, str]:
    """Why `name` (with `down_converter`) may not be added to a type whose versions are `names`: a new version comes
    after every other, and has a down-converter unless it is the first."""
    found = {}
    if name in names:
        found["name"] = f"the version {name!r} exists; a version's payload does not change once published"
    elif names and name < max(names):
        found["name"] = (f"versions come in order: name it after {max(names)!r} (names sort, e.g. dates like "
                         f"2026-11-01)")
    if names and not down_converter.strip():
        found["down_converter"] = (f"give the JavaScript handler(webhook) that turns a payload of {name!r} into one "
                                   f"of {max(names)!r}: endpoints pinned to older versions receive it through it")
    if not names and down_converter.strip():
        found["down_converter"] = "the first version has no version before it to convert to"
    return found
