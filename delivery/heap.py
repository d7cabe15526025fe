"""The garbage collector in Herald's long-lived processes (workers, web workers).

What a process builds while it starts (Django, its apps, every imported module: most of its objects) stays for the
life of the process, yet every full collection walked all of it again; and Python's young generation of 700
objects started a collection every few dozen rows a worker read or wrote. The rows, requests and answers of the
hot paths are freed by their reference counts, not by the collector. So, once started, a process freezes its heap
(the collector no longer looks at what exists now) and collects its young generation a tenth as often. On a
drain to one fast endpoint this was about a tenth of a worker's CPU (docs/benchmarks.md, "The worker cut").

gunicorn's master freezes before it forks (`freeze`), so its web workers share those pages with it instead of
copying them when a collection would have touched them; each web worker then only collects less often
(`collect_less_often`). A threshold someone else set (a host project's) is left as it is.
"""

import gc

PYTHON_DEFAULT = 700
YOUNG_GENERATION = 7000  # objects allocated (less freed) between collections of the youngest generation


def settle() -> None:
    """Once the process has started (its imports done), before its work begins: `freeze` and
    `collect_less_often`. Again is harmless."""
    freeze()
    collect_less_often()


def freeze() -> None:
    """What is garbage already is collected first, so that nothing frozen is garbage."""
    gc.collect()
    gc.freeze()


def collect_less_often() -> None:
    young, middle, old = gc.get_threshold()
    if young == PYTHON_DEFAULT:
        gc.set_threshold(YOUNG_GENERATION, middle, old)
