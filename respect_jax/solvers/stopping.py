"""A cooperative stop shared by the threads of one budgeted call (``solver=auto``'s exact solver, bound and members).

Python threads cannot be killed, so every worker of a budgeted call polls one :class:`StopSignal`: model builders
check it between nodes (:meth:`StopSignal.check` raises :class:`Stopped`), search loops between iterations, and a
running CP-SAT search is registered with it (:meth:`StopSignal.watching`) so that :meth:`StopSignal.set` ends the
search at once (``CpSolver.stop_search``) instead of at its own time limit.
"""

from __future__ import annotations

import math
import threading
import time
from contextlib import contextmanager


class Stopped(Exception):  # noqa: N818  (a signal, not an error)
    """Raised by :meth:`StopSignal.check` once the signal is set or its deadline has passed."""


class StopSignal:
    """Set by the caller (or passed by its ``deadline``, a ``time.perf_counter()`` instant); polled by workers.

    Calling the signal (``signal()``) is :meth:`is_set`, so it serves wherever a ``stop() -> bool`` callable does.
    """

    def __init__(self, deadline: float = math.inf):
        self.deadline = float(deadline)
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._solvers: list = []

    def set(self) -> None:
        """Stop every worker: the flag, and every CP-SAT search registered by :meth:`watching`."""
        with self._lock:
            self._event.set()
            solvers = list(self._solvers)
        for solver in solvers:
            solver.stop_search()

    def is_set(self) -> bool:
        """True once :meth:`set` was called or the deadline has passed."""
        return self._event.is_set() or time.perf_counter() >= self.deadline

    __call__ = is_set

    def left(self) -> float:
        """Seconds to the deadline (0 once set)."""
        return 0.0 if self.is_set() else max(self.deadline - time.perf_counter(), 0.0)

    def check(self) -> None:
        """Raise :class:`Stopped` once the signal is set."""
        if self.is_set():
            raise Stopped

    @contextmanager
    def watching(self, solver):
        """Register a CP-SAT ``CpSolver`` for the duration of its ``solve`` call: :meth:`set` stops its search.

        A search started after the signal was set still runs to its own ``max_time_in_seconds``, so callers check
        :meth:`is_set` just before ``solve`` and take their time limit from :meth:`left`.
        """
        with self._lock:
            self._solvers.append(solver)
        try:
            yield solver
        finally:
            with self._lock:
                self._solvers.remove(solver)


def check_stop(stop) -> None:
    """:meth:`StopSignal.check` for ``stop`` a :class:`StopSignal`, a ``stop() -> bool`` callable or None."""
    if stop is not None and stop():
        raise Stopped


@contextmanager
def watching(stop, solver):
    """:meth:`StopSignal.watching` when ``stop`` is a :class:`StopSignal`; nothing for a plain callable or None."""
    if isinstance(stop, StopSignal):
        with stop.watching(solver):
            yield solver
    else:
        yield solver
