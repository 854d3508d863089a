"""Run methods (policy x safety layer on/off) over scenario batches and summarise the figures.

A **method** is a policy name (:data:`.baselines.POLICIES` or ``rl``) plus whether the safety
layer runs. One compiled rollout per safety setting serves every policy (``lax.switch`` on a
traced policy index), so adding methods costs no compilation.

Figures per method (:func:`summarise`):

* ``hrt_schedulability`` -- fraction of scenarios with no HRT deadline miss;
* ``srt_satisfaction`` -- SRT jobs finished by their deadline / SRT jobs (pooled over scenarios; None
  when the scenarios release no SRT job);
* ``jain`` -- mean over scenarios of Jain's index of the per-client SRT satisfaction rates;
* ``utilisation`` -- mean over scenarios and accelerators of busy time / makespan;
* ``override_rate`` -- rejected proposals / decisions (0 without the safety layer);
* the safety layer's cost per decision -- measured separately (:func:`safety_overhead_py`,
  :func:`safety_overhead_jax`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from respect_jax.realtime.baselines import POLICIES
from respect_jax.realtime.environment import RTEnv, rollout
from respect_jax.realtime.policy import RTPolicy, as_policy
from respect_jax.realtime.reference import PY_POLICIES, PySim
from respect_jax.realtime.types import RTParams


@dataclass(frozen=True)
class Method:
    """A policy and whether the safety layer certifies its proposals."""

    name: str
    policy: str
    safety: bool


def parse_method(spec: str) -> Method:
    """``"edf"`` -> EDF without the safety layer; ``"rl+safety"`` -> RL with it."""
    policy, _, suffix = spec.partition("+")
    if suffix not in ("", "safety"):
        raise ValueError(f"method {spec!r}: the only suffix is '+safety'")
    if policy not in POLICIES and policy != "rl":
        raise ValueError(f"method {spec!r}: unknown policy {policy!r}; choose one of {', '.join([*POLICIES, 'rl'])}")
    return Method(spec, policy, suffix == "safety")


class Runner:
    """Compiled batched rollouts of several policies, with and without the safety layer.

    Args:
        policies: policy names (``rl`` needs ``model``).
        max_steps: decision cap per episode (episodes that hit it are reported as unfinished).
        model: the trained :class:`RTPolicy` (greedy decoding).
    """

    def __init__(self, policies: Sequence[str], max_steps: int, model: RTPolicy | None = None):
        self.policies = tuple(dict.fromkeys(policies))
        if "rl" in self.policies and model is None:
            raise ValueError("policy 'rl' needs a trained model (set model=...)")
        self.max_steps = int(max_steps)
        self.graphdef, self.model_state = nnx.split(model) if model is not None else (None, None)
        self._jit: dict[bool, object] = {}

    def _compiled(self, safety: bool):
        if safety not in self._jit:
            env = RTEnv(safety=safety)
            names, graphdef = self.policies, self.graphdef

            def run(params: RTParams, key: jax.Array, idx: jax.Array, model_state):
                fns = []
                for n in names:
                    if n == "rl":
                        fns.append(as_policy(nnx.merge(graphdef, model_state), greedy=True))
                    else:
                        fns.append(POLICIES[n])

                def policy(obs, state, k):
                    return jax.lax.switch(idx, [lambda o, s, kk, f=f: f(o, s, kk) for f in fns], obs, state, k)

                state, metrics = rollout(env, params, policy, key, self.max_steps)
                return state, metrics

            self._jit[safety] = jax.jit(run)
        return self._jit[safety]

    def run(self, params: RTParams, policy: str, safety: bool, seed: int = 0) -> tuple[object, dict]:
        """Final states and per-scenario metrics (NumPy, axis B) of one method on a batch."""
        fn = self._compiled(safety)
        state, metrics = fn(
            jax.tree.map(jnp.asarray, params),
            jax.random.key(seed),
            jnp.int32(self.policies.index(policy)),
            self.model_state,
        )
        jax.block_until_ready(metrics)
        return state, {k: np.asarray(v) for k, v in metrics.items()}


def summarise(metrics: dict) -> dict:
    """Figures of one method from per-scenario metrics (see the module docstring)."""
    srt_jobs = float(metrics["srt_jobs"].sum())
    decisions = float(metrics["decisions"].sum())
    return {
        "scenarios": int(len(metrics["hrt_jobs"])),
        "hrt_schedulability": float(np.mean(metrics["hrt_missed"] == 0)),
        "hrt_jobs": int(metrics["hrt_jobs"].sum()),
        "hrt_missed": int(metrics["hrt_missed"].sum()),
        "srt_satisfaction": float(metrics["srt_met"].sum() / srt_jobs) if srt_jobs else None,  # None: no SRT job
        "jain": float(np.mean(metrics["jain"])),
        "utilisation": float(np.mean(metrics["utilisation"])),
        "override_rate": float(metrics["overrides"].sum() / decisions) if decisions else 0.0,
        "decisions": int(decisions),
        "unfinished": int((~metrics["finished"]).sum()),
        "violations": int(metrics["violation"].sum()),
    }


def safety_overhead_py(packed: Sequence[RTParams], policy: str = "edf", refresh: bool = True) -> dict:
    """Per-decision wall time of the plain-Python safety layer (certify + fallback + refresh).

    What a runtime implementation in Python would pay per decision, in microseconds.
    """
    samples = []
    for p in packed:
        sim = PySim(p, safety=True, refresh=refresh, timing=True)
        sim.run(PY_POLICIES[policy])
        samples += sim.safety_seconds
    arr = np.asarray(samples) * 1e6
    return {
        "decisions": int(arr.size),
        "mean_us": float(arr.mean()) if arr.size else 0.0,
        "p50_us": float(np.percentile(arr, 50)) if arr.size else 0.0,
        "p99_us": float(np.percentile(arr, 99)) if arr.size else 0.0,
    }


def safety_overhead_jax(params: RTParams, policy: str = "edf", inner: int = 100, repeats: int = 7) -> dict:
    """Batched JAX cost of the safety layer for one decision, isolated from the rest of the step.

    On the first decision point of every scenario of ``params`` (all HRT work still pending: the
    most expensive refresh), run exactly what :meth:`RTEnv.step` runs for the layer --
    :meth:`RTEnv.safety_decision` on the policy's proposal plus the reference refresh -- ``inner``
    times in a ``lax.scan`` (time offsets fed as data so nothing is hoisted), jitted and vmapped over
    the batch. Reports the best of ``repeats`` timings divided by ``inner * B``.
    """
    from respect_jax.realtime.environment import pair_mask
    from respect_jax.realtime.safety import reference_schedule

    env = RTEnv(safety=True)
    params = jax.tree.map(jnp.asarray, params)
    state, ts = jax.jit(env.batch_reset)(params)
    b = int(params.valid.shape[0])
    action = jax.vmap(POLICIES[policy])(ts.observation, state, jax.random.split(jax.random.key(0), b))

    def layer(st, act, dt):
        st = st.replace(t=st.t + dt)
        mask = pair_mask(st)
        j, m = env.propose(mask, act)
        accepted, x, mx, dispatch, _ = env.safety_decision(st, mask, j, m)
        r_start, r_mach, ok = reference_schedule(st.params, st.t, st.free_at, st.finish, st.machine)
        return accepted.astype(jnp.int32) + x + mx + dispatch + ok + r_start[0] + r_mach[0]

    @jax.jit
    def run(st, act, offsets):
        def body(acc, dt):
            return acc + jnp.sum(jax.vmap(layer, in_axes=(0, 0, None))(st, act, dt)), None

        return jax.lax.scan(body, jnp.int32(0), offsets)[0]

    offsets = jnp.zeros((inner,), jnp.int32)
    jax.block_until_ready(run(state, action, offsets))
    best = float("inf")
    for _ in range(repeats):
        tic = time.perf_counter()
        jax.block_until_ready(run(state, action, offsets))
        best = min(best, time.perf_counter() - tic)
    return {"batch": b, "inner": inner, "us_per_decision": best / (inner * b) * 1e6}
