"""Two edge replicas sharing tenants' limits through Redis: two real `radixgate serve` processes (the
default model each, tiny answers) on one SQLite database and one real `redis-server` of this
module's own (a free loopback port, never the machine's Redis), behind one client pool that
alternates between them as a load balancer would.

Shown: one tenant's requests-per-minute and concurrency limits hold across both replicas, not
twice over; a replica killed with SIGKILL gives its concurrency slots back within the lease;
with Redis stopped both keep serving on their own local limits (no 5xx, one WARNING each) and
share again once Redis is back.

The per-minute limit is proven with a burst, not a minute of waiting: a bucket holds one
window's allowance (requests_per_minute = 60: 60 requests) and refills continuously at 60 per
window. The window is stretched to an hour here (RADIXGATE_RATE_LIMIT_WINDOW_S), so while the
burst runs (well under a minute) the refill adds less than one request: what the burst gets
accepted is exactly what the tenant may take at once, the quantity a minute's limit bounds.
Per-process buckets would accept 60 on each replica, 120 in all; shared ones accept 60.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid

import httpx
import pytest

from bench.server import ServerProcess
from tests.support.server_process import RADIXGATE

pytestmark = pytest.mark.slow

STARTUP_TIMEOUT_S = 240
LEASE_S = 3.0
RPM = 60
BODY = {"model": "default", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 1}
# An answer that cannot end early (a 4000-character string), so a stream holds its slot until closed.
LONG_BODY = {
    "model": "default", "messages": [{"role": "user", "content": "Write a long story."}], "max_tokens": 3000,
    "stream": True, "response_format": {"type": "json_schema", "json_schema": {"name": "story", "schema": {
        "type": "object", "properties": {"story": {"type": "string", "minLength": 4000}}, "required": ["story"]}}},
}


class Replica(ServerProcess):
    def create_tenant(self, **fields) -> dict:
        response = httpx.post(f"{self.url}/admin/tenants", json={"name": f"t-{uuid.uuid4().hex[:10]}", **fields},
                              headers={"Authorization": f"Bearer {self.admin_key}"}, timeout=30)
        response.raise_for_status()
        body = response.json()
        return {"id": body["id"], "headers": {"Authorization": f"Bearer {body['api_key']['key']}"}}

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def pair(tmp_path_factory, redis_server):
    """Replicas A and B: one database, one admin key, one Redis; each its own log and request-log spool."""
    shared_dir = tmp_path_factory.mktemp("edge-replicas")
    admin_key = "sk-rgadmin-" + secrets.token_urlsafe(24)
    replicas = []
    for name in ("a", "b"):
        workdir = shared_dir / name
        workdir.mkdir()
        env = {
            "RADIXGATE_DB_URL": f"sqlite:///{shared_dir / 'radixgate.db'}",
            "RADIXGATE_ADMIN_KEY": admin_key,
            "RADIXGATE_LOG_SPOOL_PATH": str(workdir / "spool"),
            "RADIXGATE_REDIS_URL": redis_server.url,
            "RADIXGATE_SHARED_LIMITS__LEASE_S": str(LEASE_S),
            "RADIXGATE_SHARED_LIMITS__RETRY_INTERVAL_S": "0.5",
            # a loaded CI machine can starve a server's event loop for seconds: that is not Redis away
            "RADIXGATE_SHARED_LIMITS__TIMEOUT_S": "10",
            "RADIXGATE_RATE_LIMIT_WINDOW_S": "3600",
            "RADIXGATE_CANONICAL_SHADOW": "false",
            "RADIXGATE_ENGINE__DTYPE": "float32",  # no start-up precision probe: two servers start sooner
            "RADIXGATE_ENGINE__KV_CACHE_TOKENS": "16384",
            "RADIXGATE_ENGINE__DEVICE": "cpu",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
        replica = Replica(env=env, workdir=workdir, command=[str(RADIXGATE)])
        replica.admin_key = admin_key
        replicas.append(replica)
    try:
        for replica in replicas:  # one after the other: the first migrates the shared database
            replica.start(STARTUP_TIMEOUT_S)
        yield replicas
    finally:
        for replica in replicas:
            replica.stop()


@pytest.fixture()
def replicas(pair, redis_server):
    """Both replicas and Redis running (a test before may have stopped one)."""
    if not redis_server.is_running:
        redis_server.start()
    for replica in pair:
        if not replica.is_running:
            replica.start(STARTUP_TIMEOUT_S)
    return pair


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(timeout=300, limits=httpx.Limits(max_connections=400, max_keepalive_connections=400))


async def burst(replicas, tenant: dict, num_requests: int) -> list[tuple[int, int]]:
    """`num_requests` chat requests at once, alternating between the replicas: (replica index, status) each."""
    async with client() as http:
        async def one(i: int) -> tuple[int, int]:
            url = f"{replicas[i % 2].url}/v1/chat/completions"
            return i % 2, (await http.post(url, json=BODY, headers=tenant["headers"])).status_code

        return await asyncio.gather(*(one(i) for i in range(num_requests)))


def accepted(results) -> int:
    statuses = [status for _, status in results]
    assert set(statuses) <= {200, 429}, statuses  # never a 5xx
    return statuses.count(200)


def num_slots(redis_server, tenant: dict) -> int:
    """The tenant's unexpired leases (expired ones stay in the set until the next acquire sweeps them)."""
    redis = redis_server.client()
    try:
        seconds, micros = redis.time()
        return redis.zcount(f"radixgate:slots:{tenant['id']}", f"({seconds * 1000 + micros // 1000}", "+inf")
    finally:
        redis.close()


def wait_until(condition, timeout_s: float, what: str) -> float:
    """Seconds until `condition()` held (polled every 50 ms); fails naming `what` past `timeout_s`."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"{what} not within {timeout_s} s"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_burst_across_both_replicas_gets_one_minutes_limit_not_twice_it(replicas):
    tenant = replicas[0].create_tenant(requests_per_minute=RPM, max_concurrency=1000)
    results = asyncio.run(burst(replicas, tenant, 2 * RPM))
    num_accepted = accepted(results)
    print(f"accepted {num_accepted} of {2 * RPM} (per replica: "
          f"{[sum(1 for r, s in results if r == i and s == 200) for i in (0, 1)]})")
    assert RPM - 2 <= num_accepted <= RPM + 2
    assert all(any(r == i and s == 200 for r, s in results) for i in (0, 1))  # both served their share


def test_concurrency_slots_are_counted_across_both_replicas_and_given_back(replicas, redis_server):
    tenant = replicas[0].create_tenant(max_concurrency=4)

    async def hold_six() -> list[int]:
        async with client() as http:
            requests = [http.build_request("POST", f"{replicas[i % 2].url}/v1/chat/completions", json=LONG_BODY,
                                           headers=tenant["headers"]) for i in range(6)]
            responses = await asyncio.gather(*(http.send(request, stream=True) for request in requests))
            try:
                assert num_slots(redis_server, tenant) == 4
                return [response.status_code for response in responses]
            finally:
                for response in responses:
                    await response.aclose()

    statuses = asyncio.run(hold_six())
    assert sorted(statuses) == [200] * 4 + [429] * 2, statuses  # 3 per replica: each alone would admit all
    wait_until(lambda: num_slots(redis_server, tenant) == 0, 10, "closed streams' slots given back")


def test_stopping_redis_leaves_both_on_local_limits_and_they_share_again_when_it_returns(replicas, redis_server):
    tenant = replicas[0].create_tenant(requests_per_minute=RPM, max_concurrency=1000)
    redis_server.stop()
    on_their_own = accepted(asyncio.run(burst(replicas, tenant, 2 * RPM + 40)))
    print(f"Redis stopped: accepted {on_their_own} of {2 * RPM + 40}")
    assert 2 * RPM - 2 <= on_their_own <= 2 * RPM + 2  # each replica's own 60
    for replica in replicas:
        assert replica.log_text().count("is unavailable") == 1, replica.log_tail()

    redis_server.start()  # empty, as a restarted Redis without persistence is: a full bucket
    for replica in replicas:
        wait_until(lambda: "is back" in replica.log_text(), 10, "the replica noticing Redis is back")
    shared_again = accepted(asyncio.run(burst(replicas, tenant, 2 * RPM)))
    print(f"Redis back: accepted {shared_again} of {2 * RPM}")
    assert RPM - 2 <= shared_again <= RPM + 2


def test_a_killed_replicas_slots_come_back_within_the_lease(replicas, redis_server):
    a, b = replicas
    tenant = a.create_tenant(max_concurrency=2)

    async def run() -> float:
        async with client() as http:
            held = [await http.send(http.build_request("POST", f"{a.url}/v1/chat/completions", json=LONG_BODY,
                                                       headers=tenant["headers"]), stream=True) for _ in range(2)]
            assert [response.status_code for response in held] == [200, 200]
            chat = f"{b.url}/v1/chat/completions"
            assert (await http.post(chat, json=BODY, headers=tenant["headers"])).status_code == 429
            a.kill()  # SIGKILL: no release, no shutdown; its heartbeat stops with it
            killed_at = time.monotonic()
            assert (await http.post(chat, json=BODY, headers=tenant["headers"])).status_code == 429  # still leased
            await asyncio.to_thread(
                wait_until, lambda: num_slots(redis_server, tenant) == 0, LEASE_S + 2, "the dead replica's slots")
            returned_s = time.monotonic() - killed_at
            assert (await http.post(chat, json=BODY, headers=tenant["headers"])).status_code == 200
            for response in held:
                await response.aclose()
            return returned_s

    returned_s = asyncio.run(run())
    print(f"slots back {returned_s:.2f} s after SIGKILL (lease {LEASE_S} s)")
    assert returned_s <= LEASE_S + 0.5
