"""The garbage collector in Herald's long-lived processes (workers, web workers).

What a process builds while it starts (Django, its apps, every imported module: most of its objects) stays for the
life of the process, yet every full collection walked all of it again; and Python's young generation of 700
objects started a collection every few dozen rows a worker read or wrote. The rows, requests and answers of the
hot paths are freed by their reference counts, not by the collector. So, once started, a process freezes its heap
(the collector no longer looks at what exists now) and collects its young generation a tenth as often. On a
drain to one fast endpoint this was about a tenth of a worker's CPU (docs/benchmarks.md, "CPU per delivery").
"""

import gc

YOUNG_GENERATION = 7000  # objects allocated (less freed) between collections of the youngest generation (700)


def settle() -> None:
    """Call once the process has started (its imports done), before its work begins; again is harmless. What is
    garbage already is collected first, so that nothing frozen is garbage."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_GENERATION, middle, old)
