"""File descriptors, budgeted: a worker's sockets to endpoints are the process's largest use of them, and a tenant
chooses how long its endpoints keep theirs open (docs/architecture.md, "Descriptors").

At start every Herald process raises its soft RLIMIT_NOFILE to the hard limit (`raise_soft_limit`; systemd's
default soft limit is 1,024, and the documented units and manifests set `LimitNOFILE`). The transport then sizes its
bounds against what it has (`budget`): RESERVED descriptors stay for PostgreSQL and Redis connections, log files,
the metrics exporter, the name lookups and a margin; half the rest stays for connections kept alive between sends
(the HTTP client closes them after 30 s idle); of the other half, each send slot may bring STALLED_PER_SLOT stalled
sends beside it, so sends in flight are at most a 1 + STALLED_PER_SLOT part, and stalled ones the remainder. A
process under a small limit thus sends fewer at once instead of failing every new connection with "Too many open
files", and what it cannot keep open is ended in shares (stalls.py), never a quiet tenant's first try.
"""

import logging
import resource
from dataclasses import dataclass

log = logging.getLogger(__name__)
RESERVED = 256
MIN_IN_FLIGHT = 8


@dataclass(frozen=True)
class Budget:
    descriptors: int  # the soft limit
    in_flight: int  # sends holding a slot at once
    stalled: int  # stalled sends kept open beside them

    def __str__(self) -> str:
        return (f"{self.descriptors} descriptors: {self.in_flight} sends in flight, {self.stalled} stalled, the "
                f"rest for kept-alive connections, PostgreSQL, Redis and files")


def raise_soft_limit() -> int:
    """Raise the soft limit on open files to the hard limit if it is lower; the soft limit now. Never raises (a
    platform that refuses keeps its limit, which `budget` then works within)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY:
            hard = 1 << 20
        if soft == resource.RLIM_INFINITY or soft >= hard:
            return soft if soft != resource.RLIM_INFINITY else hard
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    except (ValueError, OSError) as exc:
        log.warning("the limit on open files could not be raised (%s)", exc)
        return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def budget(descriptors: int, *, max_in_flight: int, stalled_per_slot: int) -> Budget:
    """Sends in flight and stalled sends a process may keep with `descriptors` open files: what the settings ask
    for, or less where the descriptors would not hold it (pure). Half of what is left after RESERVED goes to
    sends; the other half stays for connections kept alive between sends, which the HTTP client's own limit does
    not count. Never fewer than MIN_IN_FLIGHT in flight and as many stalled (a process with no room for stalled
    sends would end every send unanswered after a second)."""
    sendable = max(0, descriptors - RESERVED) // 2
    in_flight = max(MIN_IN_FLIGHT, min(max_in_flight, sendable // (1 + stalled_per_slot)))
    stalled = max(in_flight, min(stalled_per_slot * max_in_flight, sendable - in_flight))
    return Budget(descriptors=descriptors, in_flight=in_flight, stalled=stalled)
