"""The nodes of each pool and the cluster autoscaler over them: nodes boot, take pods, are lost,
and are scaled down when unneeded (the engine's module doc says what each step follows upstream).

A part of the Simulation (infra.tools.simulate.engine): it reads and changes the simulation's
state, and asks the engine to start and interrupt jobs, which belong to Kueue's side.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from typing import Any

from infra.tools.simulate.model import StackModel
from infra.tools.simulate.state import INTERRUPT, NODE_READY, SCALE_DOWN, UNPARK, Job, Node, PoolState, place_order


class Autoscaling(ABC):
    """Nodes and the autoscaler, over the state the Simulation holds."""

    model: StackModel
    pools: list[PoolState]
    dirty: set[int]
    next_node: int
    last_scale_up: float
    # Scale-downs held by the delay after the last scale-up: (pool, node, token).
    parked: list[tuple[int, Node, int]]
    unpark_pending: bool

    @abstractmethod
    def _push(self, time: float, kind: int, obj: Any, token: int = 0) -> None:
        """Schedule an event on the simulation's clock."""

    @abstractmethod
    def _start(self, pool: PoolState, job: Job, nodes: list[Node], now: float) -> None:
        """The job's pods start on `nodes`."""

    @abstractmethod
    def _interrupt(self, pool: PoolState, job: Job, now: float) -> None:
        """The job lost a node."""

    def _add_node(self, pool: PoolState, now: float) -> Node:
        """A node that boots for the pool's scale-up delay; spot nodes draw their loss now."""
        node = Node(self.next_node, now, pool.model.slots_per_node)
        self.next_node += 1
        pool.nodes.append(node)
        pool.provisioning += 1
        if pool.rate > 0:
            self._push(now + pool.rng.expovariate(pool.rate), INTERRUPT, (pool.index, node))
        return node

    def _boot(self, pool: PoolState, now: float) -> None:
        self._push(now + pool.model.scale_up_s, NODE_READY, (pool.index, self._add_node(pool, now)))

    def _ready(self, pool: PoolState, node: Node, now: float) -> None:
        pool.provisioning -= 1
        node.ready = True
        if pool.model.whole_nodes:
            pool.free.append(node)
        pool.candidates.append(node)
        self.dirty.add(pool.index)

    def _remove_node(self, pool: PoolState, node: Node, now: float) -> None:
        """Scaled down or lost: its jobs are interrupted; the group keeps its minimum size."""
        node.alive = False
        pool.nodes.remove(node)
        pool.lifetimes.append((node.created, now))
        if not node.ready:
            pool.provisioning -= 1
        if node in pool.free:
            pool.free.remove(node)
        for job in list(node.jobs):
            self._interrupt(pool, job, now)
        while pool.alive_nodes() < pool.model.min_nodes:
            self._boot(pool, now)
        self.dirty.add(pool.index)

    def _scale_down(self, pool: PoolState, node: Node, token: int, now: float) -> None:
        if pool.alive_nodes() <= pool.model.min_nodes:
            node.timer = False
            return
        autoscaler = self.model.autoscaler
        assert autoscaler is not None, "only autoscaled pools arm scale-down timers"
        resume = self.last_scale_up + autoscaler.delay_after_add_s
        if now < resume:
            self.parked.append((pool.index, node, token))
            if not self.unpark_pending:
                self.unpark_pending = True
                self._push(resume, UNPARK, None)
            return
        self._remove_node(pool, node, now)

    def _unpark(self, now: float) -> None:
        """Scale-downs held by the delay after a scale-up, once it has passed (or wait again)."""
        autoscaler = self.model.autoscaler
        assert autoscaler is not None, "only autoscaled pools park scale-downs"
        resume = self.last_scale_up + autoscaler.delay_after_add_s
        if now < resume:
            self._push(resume, UNPARK, None)
            return
        self.unpark_pending = False
        parked, self.parked = self.parked, []
        for index, node, token in parked:
            if node.alive and node.token == token:
                self._scale_down(self.pools[index], node, token, now)

    @staticmethod
    def _wait(pool: PoolState, job: Job) -> None:
        bisect.insort(pool.waiting, job, key=place_order)
        if not job.expendable:
            pool.demand_nodes += job.nodes

    @staticmethod
    def _unwait(pool: PoolState, job: Job) -> None:
        pool.waiting.remove(job)
        if not job.expendable:
            pool.demand_nodes -= job.nodes

    def _place(self, pool: PoolState, now: float) -> None:
        """The scheduler: admitted jobs by pod priority, then admission time, onto ready nodes."""
        if not pool.waiting:
            return
        whole = pool.model.whole_nodes
        if whole and not pool.free:
            return
        most = self.model.autoscaler is not None and self.model.autoscaler.pack_most_allocated
        still: list[Job] = []
        for job in pool.waiting:
            if whole:
                if len(pool.free) >= job.nodes:
                    self._start(pool, job, [pool.free.pop() for _ in range(job.nodes)], now)
                    continue
            else:
                fits = [n for n in pool.nodes if n.ready and n.free >= job.per_node]
                if len(fits) >= job.nodes:
                    fits.sort(key=lambda n: (n.free if most else -n.free, n.id))
                    self._start(pool, job, fits[: job.nodes], now)
                    continue
            still.append(job)
        pool.waiting = still

    def _scale_up(self, pool: PoolState, now: float) -> None:
        """The cluster autoscaler: nodes for the pods no node (up or booting) can take."""
        m = pool.model
        room = m.max_nodes - pool.alive_nodes()
        if not m.autoscaled or room <= 0 or not pool.waiting:
            return
        if m.whole_nodes:
            add = pool.demand_nodes - len(pool.free) - pool.provisioning
        else:
            demand = [j for j in pool.waiting if not j.expendable]
            spare = [n.free for n in pool.nodes if n.ready] + [m.slots_per_node] * pool.provisioning
            add = 0
            for job in demand:
                placed = 0
                for i, free in enumerate(spare):
                    if placed == job.nodes:
                        break
                    if free >= job.per_node:
                        spare[i] -= job.per_node
                        placed += 1
                for _ in range(job.nodes - placed):
                    spare.append(m.slots_per_node - job.per_node)
                    add += 1
        for _ in range(min(add, room)):
            self._boot(pool, now)
            self.last_scale_up = now

    def _arm_scale_down(self, pool: PoolState, now: float) -> None:
        autoscaler = self.model.autoscaler
        candidates, pool.candidates = pool.candidates, []
        if autoscaler is None or not pool.model.autoscaled:
            return
        for node in candidates:
            if node.alive and node.ready and node.busy == 0 and not node.timer:
                node.timer = True
                self._push(now + autoscaler.unneeded_s, SCALE_DOWN, (pool.index, node), node.token)
