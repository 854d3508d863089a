"""Plain-Python discrete-event reference simulator of the same model (no JAX, no NumPy in the loop).

Events live in a heap ordered by ``(time, priority, sequence)`` and are processed in time order:

* ``DISPATCH`` (a query appears at its source; the policy picks site and variant; the query joins
  the site's FIFO, in flight towards it),
* ``ARRIVE`` (it reaches the site), ``FINISH`` (a worker completes), ``REMOVE`` (its wait or
  deadline limit passes while still queued), ``RESPOND`` (the answer is back at the source).

After every ``ARRIVE``, ``FINISH`` and ``REMOVE`` the site starts queries from the head of its FIFO
while the head has arrived and a worker is idle (the idle worker that has been free longest,
lowest index on ties). At equal times, finishes and arrivals come before removals (a query may
still start at its exact limit), removals of earlier-dispatched queries first, and dispatches
last (a policy sees every change up to and including its own time). Conditions that change over time
reach a query through its trace's per-site factors at dispatch (``net_pct`` on its round trip, ``slow_pct`` on
its processing time), applied with the same integer arithmetic as the JAX simulator. Times are integer
microseconds, as in the JAX simulator, so the two give identical per-query outcomes on a shared
trace (tests/test_edge_reference.py).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Sequence

import numpy as np

from respect_jax.edge_cluster.types import DROPPED, EXPIRED, LATE, LOW_ACCURACY, SUCCESS, EdgeParams, Trace

FINISH, ARRIVE, REMOVE, DISPATCH, RESPOND = 0, 1, 2, 3, 4
BACKLOG_CAP_US = 10**8


class _Query:
    __slots__ = ("index", "t", "source", "app", "jitter_pct", "service_pct", "rand", "net_pct", "slow_pct",
                 "site", "variant",
                 "svc", "down", "limit", "deadline_abs", "wait_limit", "arrived", "state", "code",
                 "start", "done", "resolve")

    def __init__(self, index, t, source, app, jitter_pct, service_pct, rand, net_pct, slow_pct):
        self.index, self.t, self.source, self.app = index, t, source, app
        self.jitter_pct, self.service_pct, self.rand = jitter_pct, service_pct, rand
        self.net_pct, self.slow_pct = net_pct, slow_pct  # per-site factors at dispatch (lists of S ints)
        self.arrived, self.state = False, "queued"
        self.code = self.start = self.done = self.resolve = -1


class ReferenceSimulator:
    """The edge cluster as plain Python objects; ``run(trace, policy)`` simulates one trace."""

    def __init__(self, params: EdgeParams):
        def py(x):
            return np.asarray(x).tolist()

        self.workers = np.bincount(np.asarray(params.slot_site), minlength=len(np.asarray(params.proc_us))).tolist()
        self.max_wait, self.rtt, self.jitter = py(params.max_wait_us), py(params.rtt_us), py(params.jitter_us)
        self.proc, self.acc, self.min_acc = py(params.proc_us), py(params.accuracy_pm), py(params.min_accuracy_pm)
        self.deadline, self.family = py(params.deadline_us), py(params.variant_mask)
        self.num_sites, self.num_variants = len(self.proc), len(self.proc[0])
        self.policies = {
            "closest": self._closest,
            "fastest_expected": self._fastest_expected,
            "most_accurate": self._most_accurate,
            "least_loaded": self._least_loaded,
            "random": self._random,
        }

    # ------------------------------------------------------------------ policies
    def _feasible(self, app: int) -> list[int]:
        return [v for v in range(self.num_variants) if self.family[app][v] and self.acc[v] >= self.min_acc[app]]

    def _cheapest(self, app: int, site: int) -> int:
        return min(self._feasible(app), key=lambda v: (self.proc[site][v], v))

    def _backlog(self, site: int, at: int) -> int:
        return max(self.vclock[site] - at, 0)

    def _closest(self, q: _Query) -> tuple[int, int]:
        site = min(range(self.num_sites), key=lambda s: (self.rtt[q.source][s], s))
        return site, self._cheapest(q.app, site)

    def _fastest_expected(self, q: _Query) -> tuple[int, int]:
        best, choice = None, None
        for s in range(self.num_sites):
            rtt = self.rtt[q.source][s]
            wait = self._backlog(s, q.t + rtt // 2)
            for v in self._feasible(q.app):
                key = (rtt + wait + self.proc[s][v], s, v)
                if best is None or key < best:
                    best, choice = key, (s, v)
        return choice

    def _most_accurate(self, q: _Query) -> tuple[int, int]:
        pairs = [(s, v) for s in range(self.num_sites) for v in self._feasible(q.app)]
        nominal = {p: self.rtt[q.source][p[0]] + self.proc[p[0]][p[1]] for p in pairs}
        in_time = [p for p in pairs if nominal[p] <= self.deadline[q.app]]
        if in_time:
            best = max(self.acc[v] for _, v in in_time)
            return min((p for p in in_time if self.acc[p[1]] == best), key=lambda p: (nominal[p], p))
        return min(pairs, key=lambda p: (nominal[p], p))

    def _least_loaded(self, q: _Query) -> tuple[int, int]:
        site = min(range(self.num_sites), key=lambda s: (self._backlog(s, q.t), self.rtt[q.source][s], s))
        return site, self._cheapest(q.app, site)

    def _random(self, q: _Query) -> tuple[int, int]:
        allowed = [(s, v) for s in range(self.num_sites) for v in range(self.num_variants) if self.family[q.app][v]]
        return allowed[q.rand % len(allowed)]

    # ------------------------------------------------------------------ simulation
    def run(self, trace: Trace, policy: str | Sequence[int]) -> dict[str, np.ndarray]:
        """Simulate every valid query of a single trace (NumPy or jnp arrays, leading axis Q).

        Args:
            policy: a static policy name, or one flat action ``site * V + variant`` per slot.
        Returns:
            i64[Q] arrays ``code``, ``site``, ``variant``, ``start_us``, ``done_us``, ``resolve_us``
            (-1 on padding), the same fields as the JAX :class:`~respect_jax.edge_cluster.types.Outcome`.
        """
        cols = {f: np.asarray(getattr(trace, f)).tolist() for f in
                ("time_us", "source", "app", "jitter_pct", "service_pct", "rand", "valid", "net_pct", "slow_pct")}
        if isinstance(policy, str):
            if policy not in self.policies:
                raise ValueError(f"unknown policy {policy!r}; choose one of {', '.join(self.policies)}")
            choose, actions = self.policies[policy], None
        else:
            choose, actions = None, [int(a) for a in np.asarray(policy).tolist()]
        self.vclock = [0] * self.num_sites
        free = [[0] * w for w in self.workers]
        fifo = [deque() for _ in range(self.num_sites)]
        queries = [
            _Query(i, cols["time_us"][i], cols["source"][i], cols["app"][i], cols["jitter_pct"][i],
                   cols["service_pct"][i], cols["rand"][i], cols["net_pct"][i], cols["slow_pct"][i])
            for i in range(len(cols["valid"])) if cols["valid"][i]
        ]
        heap: list = [(q.t, DISPATCH, q.index, q) for q in queries]
        heapq.heapify(heap)

        def try_start(site: int, now: int) -> None:
            queue, slots = fifo[site], free[site]
            while queue:
                head = queue[0]
                if head.state != "queued":
                    queue.popleft()
                    continue
                if not head.arrived:
                    return
                worker = min(range(len(slots)), key=lambda w: (slots[w], w))
                if slots[worker] > now:
                    return
                queue.popleft()
                head.state, head.start = "started", now
                head.done = now + head.svc
                slots[worker] = head.done
                response = head.done + head.down
                if response > head.deadline_abs:
                    head.code = LATE
                elif self.acc[head.variant] < self.min_acc[head.app]:
                    head.code = LOW_ACCURACY
                else:
                    head.code = SUCCESS
                heapq.heappush(heap, (head.done, FINISH, head.index, head))
                heapq.heappush(heap, (response, RESPOND, head.index, head))

        while heap:
            now, kind, _, q = heapq.heappop(heap)
            if kind == DISPATCH:
                if actions is None:
                    site, variant = choose(q)
                else:
                    a = min(max(actions[q.index], 0), self.num_sites * self.num_variants - 1)
                    site, variant = divmod(a, self.num_variants)
                q.site, q.variant = site, variant
                rtt = self.rtt[q.source][site]
                factor = q.net_pct[site]  # the path's delay factor at dispatch (percent; 100 = nominal)
                net = rtt * factor // 100 + (self.jitter[q.source][site] * factor // 100) * q.jitter_pct // 100
                up = net // 2
                q.down = net - up
                nominal = self.proc[site][variant]
                q.svc = max((nominal * q.slow_pct[site] // 100) * q.service_pct // 100, 1)
                q.deadline_abs = q.t + self.deadline[q.app]
                q.wait_limit = q.t + up + self.max_wait[site]
                q.limit = min(q.wait_limit, q.deadline_abs)
                workers = self.workers[site]
                vclock = max(self.vclock[site], q.t + rtt // 2) + -(-nominal // workers)  # ceil
                self.vclock[site] = min(vclock, q.t + BACKLOG_CAP_US)
                fifo[site].append(q)
                heapq.heappush(heap, (q.t + up, ARRIVE, q.index, q))
                heapq.heappush(heap, (q.limit, REMOVE, q.index, q))
            elif kind == ARRIVE:
                q.arrived = True
                try_start(q.site, now)
            elif kind == REMOVE:
                if q.state == "queued":
                    q.state = "removed"
                    q.code = EXPIRED if q.deadline_abs <= q.wait_limit else DROPPED
                    q.done = q.resolve = now
                    try_start(q.site, now)
            elif kind == FINISH:
                try_start(q.site, now)
            else:  # RESPOND
                q.resolve = now

        size = len(cols["valid"])
        out = {k: np.full(size, -1, np.int64) for k in ("code", "site", "variant", "start_us", "done_us", "resolve_us")}
        for q in queries:
            for key, value in (("code", q.code), ("site", q.site), ("variant", q.variant), ("start_us", q.start),
                               ("done_us", q.done), ("resolve_us", q.resolve)):
                out[key][q.index] = value
        return out
