"""Maximum flow (Dinic), iterative so deep graphs cannot exhaust the recursion limit.

Capacities are floats in Gb/s. IB data rates (8, 16, 32, 40, 54.5, 100, ... and
their 1x/2x/8x/12x multiples) are dyadic fractions, so sums stay exact in binary
floating point; EPS only guards against residues from other inputs.
"""

from __future__ import annotations

from collections import deque

EPS = 1e-9


class MaxFlow:
    def __init__(self, n: int) -> None:
        self.n = n
        self.head: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[float] = []

    def add_edge(self, u: int, v: int, cap: float, reverse_cap: float = 0.0) -> None:
        """Arc u->v with `cap`; `reverse_cap` > 0 makes it a full-duplex (undirected) pair."""
        if cap <= 0 and reverse_cap <= 0:
            return
        self.head[u].append(len(self.to))
        self.to.append(v)
        self.cap.append(cap)
        self.head[v].append(len(self.to))
        self.to.append(u)
        self.cap.append(reverse_cap)

    def max_flow(self, s: int, t: int) -> float:
        if s == t:
            return 0.0
        head, to, cap = self.head, self.to, self.cap
        total = 0.0
        while True:
            level = self._levels(s, t)
            if level[t] < 0:
                return total
            pos = [0] * self.n  # current-arc pointer per vertex
            path: list[int] = []
            v = s
            while True:
                if v == t:
                    f = min(cap[e] for e in path)
                    for e in path:
                        cap[e] -= f
                        cap[e ^ 1] += f
                    total += f
                    # Retreat to the tail of the first saturated arc and continue from there.
                    for k, e in enumerate(path):
                        if cap[e] <= EPS:
                            del path[k:]
                            break
                    v = to[path[-1]] if path else s
                    continue
                arcs = head[v]
                i = pos[v]
                lv = level[v] + 1
                while i < len(arcs):
                    e = arcs[i]
                    if cap[e] > EPS and level[to[e]] == lv:
                        break
                    i += 1
                pos[v] = i
                if i < len(arcs):
                    path.append(arcs[i])
                    v = to[arcs[i]]
                    continue
                if v == s:
                    break
                level[v] = -1  # dead end for the rest of this phase
                e = path.pop()
                v = to[e ^ 1]
                pos[v] += 1

    def _levels(self, s: int, t: int) -> list[int]:
        head, to, cap = self.head, self.to, self.cap
        level = [-1] * self.n
        level[s] = 0
        queue = deque([s])
        while queue:
            v = queue.popleft()
            for e in head[v]:
                w = to[e]
                if level[w] < 0 and cap[e] > EPS:
                    level[w] = level[v] + 1
                    queue.append(w)
        return level
