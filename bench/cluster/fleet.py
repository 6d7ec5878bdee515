"""A fleet on loopback for `bench cluster` and its test: radixgate nodes (embedded engine), edges
(`serve --no-engine`, one per routing mode) in front of them, or edges in front of given remotes.

    with Fleet.local(num_nodes=3, modes=MODES) as fleet:
        fleet.edges["affinity"].url, fleet.nodes[0].url, fleet.kill_node(1), fleet.restart_node(1)

Each node gets one tenant for the edges ("edge"); the edges send chats with its key and their own
tenants' cache salts, so tenants stay apart on the nodes and the nodes' cached_tokens are trusted.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field

import httpx

from bench.server import ServerProcess

NODE_KV_CACHE_TOKENS = 16384
EDGE_HEALTH_INTERVAL_S = 0.5
NODE_COOLDOWN_S = 2.0


@dataclass(frozen=True)
class Remote:
    """One upstream of the edges: a URL, its kind and model, and the key the edges send."""

    name: str
    api_base: str
    kind: str = "radixgate"
    model: str = "default"
    api_key: str | None = None

    def settings(self) -> dict:
        entry = {"name": self.name, "model": self.model, "api_base": self.api_base, "kind": self.kind,
                 "cooldown_s": NODE_COOLDOWN_S, "connect_timeout_s": 2.0}
        return entry | ({"api_key": self.api_key} if self.api_key else {})


def threads_per_node(num_nodes: int) -> int:
    """Torch threads for each of `num_nodes` nodes on this machine: its cores shared out, at least one."""
    return max(1, (os.cpu_count() or 1) // num_nodes)


def node_tenant_key(node: ServerProcess, name: str = "edge") -> str:
    """Create tenant `name` on a node (through its admin API) and return its key."""
    response = httpx.post(f"{node.url}/admin/tenants", json={"name": name},
                          headers={"Authorization": f"Bearer {node.admin_key}"}, timeout=30)
    response.raise_for_status()
    return response.json()["api_key"]["key"]


def edge_process(remotes: list[Remote], mode: str, env: dict[str, str] | None = None) -> ServerProcess:
    """An edge (`serve --no-engine --routing MODE`) in front of `remotes`."""
    edge_env = {
        "RADIXGATE_REMOTES": json.dumps([r.settings() for r in remotes]),
        "RADIXGATE_ROUTING__HEALTH_INTERVAL_S": str(EDGE_HEALTH_INTERVAL_S),
        "RADIXGATE_LOG_LEVEL": "INFO",
        **(env or {}),
    }
    return ServerProcess(env=edge_env, args=["--no-engine", "--routing", mode])


@dataclass
class Fleet:
    nodes: list[ServerProcess] = field(default_factory=list)
    edges: dict[str, ServerProcess] = field(default_factory=dict)
    remotes: list[Remote] = field(default_factory=list)
    _stack: ExitStack = field(default_factory=ExitStack)

    @classmethod
    def local(cls, num_nodes: int, modes: list[str], kv_cache_tokens: int = NODE_KV_CACHE_TOKENS,
              edge_env: dict[str, str] | None = None, node_envs: list[dict[str, str]] | None = None) -> Fleet:
        """Start `num_nodes` radixgate nodes, then one edge per routing mode in front of them
        (`edge_env`: more settings for the edges, e.g. RADIXGATE_ROUTING__SEED; `node_envs[i]`: more
        for node i, e.g. its KV-event endpoint).

        The nodes share this machine's cores: each runs torch on cores / nodes threads (at least one),
        as one would deploy them on one box; more would oversubscribe the cores, and OpenMP's
        spinning threads then slow every node down several times over."""
        fleet = cls()
        env = {"RADIXGATE_ENGINE__KV_CACHE_TOKENS": str(kv_cache_tokens), "RADIXGATE_LOG_LEVEL": "INFO",
               "RADIXGATE_CANONICAL_SHADOW": "true", "OMP_NUM_THREADS": str(threads_per_node(num_nodes))}
        fleet.nodes = [ServerProcess(env=env | (node_envs[i] if node_envs else {})) for i in range(num_nodes)]
        fleet._start_all(fleet.nodes)
        fleet.remotes = [Remote(f"node{i}", f"{n.url}/v1", api_key=node_tenant_key(n)) for i, n in enumerate(fleet.nodes)]
        fleet.add_edges(modes, edge_env)
        return fleet

    @classmethod
    def in_front_of(cls, remotes: list[Remote], modes: list[str]) -> Fleet:
        fleet = cls(remotes=list(remotes))
        fleet.add_edges(modes)
        return fleet

    def add_edges(self, modes: list[str], env: dict[str, str] | None = None) -> None:
        edges = {mode: edge_process(self.remotes, mode, env) for mode in modes}
        self._start_all(list(edges.values()))
        self.edges.update(edges)

    def add_edge(self, name: str, remotes: list[Remote], mode: str = "affinity") -> ServerProcess:
        """One more edge, in front of `remotes` only (e.g. one upstream for the salt check)."""
        edge = edge_process(remotes, mode)
        self._start_all([edge])
        self.edges[name] = edge
        return edge

    def _start_all(self, processes: list[ServerProcess]) -> None:
        for process in processes:
            self._stack.callback(process.__exit__, None, None, None)
        with ThreadPoolExecutor(max_workers=len(processes) or 1) as pool:
            list(pool.map(lambda p: p.start(), processes))

    def kill_node(self, index: int) -> None:
        self.nodes[index].kill()

    def restart_node(self, index: int) -> None:
        self.nodes[index].start()

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
