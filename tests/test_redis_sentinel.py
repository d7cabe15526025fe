"""Herald on Redis under Sentinel: a primary, a replica and three sentinels. Real workers and the scheduler find the
primary through the sentinels (`REDIS_SENTINELS`); the primary is killed mid-run, the sentinels promote the replica,
and every process goes on by itself: every message is delivered, none stuck. The old primary, started again, is
made a replica by the sentinels, and traffic keeps flowing to the new one. Asked to stop, every process exits."""

import os
import shutil
import signal
import tempfile
import time

import pytest
from django.core.cache import cache
from django.core.exceptions import ImproperlyConfigured
from redis import Redis

from delivery import redis_config
from delivery.engine.plumbing import redis_link
from delivery.management import localredis
from delivery.models import Delivery
from tests.conftest import publish, subscribe, wait_until

pytestmark = pytest.mark.django_db(transaction=True)
MASTER = "herald"


class SentinelRedis:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="herald-sentinel-")
        self.primary_port, self.replica_port = localredis.free_port(), localredis.free_port()
        self.sentinel_ports = [localredis.free_port() for _ in range(3)]
        self.processes: dict[int, object] = {}

    def start(self) -> "SentinelRedis":
        self.start_redis(self.primary_port)
        self.start_redis(self.replica_port, "--replicaof", "127.0.0.1", str(self.primary_port))
        for port in self.sentinel_ports:
            self.processes[port] = localredis.start_sentinel(port, os.path.join(self.dir, f"s{port}"), MASTER,
                                                             self.primary_port)
        # Ready when each sentinel knows the replica and the two other sentinels (they learn them through the
        # primary, every 2 s): only then can a quorum agree on a failover.
        wait_until(lambda: all(self.sentinel(port).sentinel_slaves(MASTER) and
                               len(self.sentinel(port).sentinel_sentinels(MASTER)) == 2
                               for port in self.sentinel_ports), timeout=30, interval=0.2)
        return self

    def start_redis(self, port: int, *extra: str) -> None:
        self.processes[port] = localredis.start(port, os.path.join(self.dir, f"r{port}"), extra=extra)

    def sentinel(self, port: int) -> Redis:
        return Redis(port=port, socket_timeout=2, decode_responses=True)

    def primary(self) -> int:
        return int(self.sentinel(self.sentinel_ports[0]).sentinel_get_master_addr_by_name(MASTER)[1])

    @property
    def environment(self) -> dict:
        return {"REDIS_SENTINELS": ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports),
                "REDIS_SENTINEL_MASTER": MASTER, "REDIS_URL": "redis://127.0.0.1:1/0"}  # the URL is not used

    def kill(self, port: int) -> None:
        process = self.processes.pop(port)
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def stop(self) -> None:
        for process in self.processes.values():
            process.kill()
            process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def sentinel_redis(settings):
    group = SentinelRedis().start()
    # This test process publishes through the same Sentinel-named primary as the workers.
    settings.RQ_QUEUES = redis_config.rq_queues(group.environment, "")
    yield group
    group.stop()


def test_settings_from_the_environment():
    environment = {"REDIS_SENTINELS": "10.0.0.7:26379, [fd00::8]:26380", "REDIS_SENTINEL_MASTER": "events",
                   "REDIS_DB": "2", "REDIS_PASSWORD": "data-pw", "REDIS_SENTINEL_PASSWORD": "sentinel-pw"}
    queues = redis_config.rq_queues(environment, "redis://ignored:6379/0")
    assert set(queues) == {"deliveries", "retries"}
    queue = queues["deliveries"]
    assert queue["SENTINELS"] == [("10.0.0.7", 26379), ("fd00::8", 26380)]
    assert (queue["MASTER_NAME"], queue["DB"], queue["PASSWORD"]) == ("events", 2, "data-pw")
    assert queue["SENTINEL_KWARGS"]["password"] == "sentinel-pw" and "URL" not in queue
    assert redis_config.rq_queues({}, "redis://r:6379/3")["retries"]["URL"].startswith("redis://r:6379/3?")
    assert redis_config.cache(environment, "")["OPTIONS"]["sentinel"]["MASTER_NAME"] == "events"
    for wrong in ("10.0.0.7", "10.0.0.7:port", ":26379"):
        with pytest.raises(ImproperlyConfigured, match="REDIS_SENTINELS"):
            redis_config.rq_queues({"REDIS_SENTINELS": wrong}, "")


def test_a_sentinel_failover_mid_run_loses_nothing(sentinel_redis, settings, api, receiver, processes):
    env = sentinel_redis.environment
    settings.CACHES = {"default": redis_config.cache(env, "")}
    cache.close()
    old_primary = sentinel_redis.primary()
    assert old_primary == sentinel_redis.primary_port
    topic, _ = subscribe(api, receiver)
    for _ in range(2):
        processes.worker(**env)
    processes.cron(**env)
    for n in range(30):
        publish(api, topic, n)
    wait_until(lambda: len(receiver.requests) >= 10, timeout=60)
    assert redis_link.connection().connection_pool.get_master_address()[1] == old_primary  # found via Sentinel

    sentinel_redis.kill(old_primary)  # mid-run: jobs queued on it and not yet replicated are gone with it
    refused = 0
    for n in range(30, 60):  # a publisher goes on through the outage: a 503 says "nothing was changed, try again"
        while (answer := api.post(f"/api/topics/{topic['id']}/publish/", {"payload": n}, format="json")
               ).status_code == 503:
            refused += 1
            time.sleep(0.2)
        assert answer.status_code == 202, answer.content
    wait_until(lambda: sentinel_redis.primary() == sentinel_redis.replica_port, timeout=30, interval=0.2)
    for n in range(60, 90):
        publish(api, topic, n)
    wait_until(lambda: not Delivery.objects.exclude(status="succeeded").exists() and
               Delivery.objects.count() == 90, timeout=120, interval=0.2)
    assert {r.json()["data"] for r in receiver.requests} == set(range(90))
    assert Redis(port=sentinel_redis.replica_port).info("replication")["role"] == "master"
    print(f"publishes answered 503 during the failover: {refused}")

    # The old primary comes back; the sentinels make it a replica of the new one and nothing goes back to it.
    sentinel_redis.start_redis(old_primary)
    wait_until(lambda: Redis(port=old_primary).info("replication")["role"] == "slave", timeout=30, interval=0.2)
    for n in range(90, 100):
        publish(api, topic, n)
    wait_until(lambda: Delivery.objects.filter(status="succeeded").count() == 100, timeout=60, interval=0.2)
    assert all(process.poll() is None for process in processes.running)  # nothing exited by itself
    # Asked to stop, each exits (a worker in its blocking pop used to wait out the pop's timeout, minutes).
    for process in processes.running:
        process.terminate()
    for process in processes.running:
        assert process.wait(15) == 0, process.args
