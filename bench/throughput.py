"""End-to-end delivery throughput, beside a plain requests.Session loop to the same receiver.

Run with `make bench` (throwaway PostgreSQL + Redis), or with DATABASE_URL/REDIS_URL set:

    python bench/throughput.py --messages 3000 --workers 2 --subscriptions 1

It publishes N messages (through the publish service, workers stopped), then starts K real RQ worker processes
(`rqworker`, HeraldWorker from settings) and the scheduler (`herald_cron`), and times until every
delivery has succeeded. The receiver is a separate asyncio process, so it is not the bottleneck.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
os.environ.setdefault("RQ_LOG_LEVEL", "ERROR")
os.environ.setdefault("LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

import django_rq  # noqa: E402
import requests  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from delivery.engine.publishing import message_publish  # noqa: E402
from delivery.management import localredis  # noqa: E402
from delivery.models import Delivery, Message  # noqa: E402
from subscriptions.models import Endpoint, Subscription, Topic  # noqa: E402


def start_receiver() -> tuple[subprocess.Popen, str]:
    port = localredis.free_port()
    process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "receiver.py"), str(port)],
                               stdout=subprocess.PIPE, text=True)
    process.stdout.readline()
    return process, f"http://127.0.0.1:{port}/hook"


def client_loop(url: str, count: int) -> float:
    session = requests.Session()
    body = json.dumps({"specversion": "1.0", "data": {"n": 1}}).encode()
    started = time.perf_counter()
    for _ in range(count):
        response = session.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=5)
        response.raise_for_status()
    return count / (time.perf_counter() - started)


def reset(url: str, subscriptions: int) -> Topic:
    Delivery.objects.all().delete()
    Message.objects.all().delete()
    Subscription.objects.all().delete()
    Endpoint.objects.all().delete()
    Topic.objects.all().delete()
    django_rq.get_connection("deliveries").flushdb()
    user, _ = get_user_model().objects.get_or_create(username="bench")
    topic = Topic.objects.create(owner=user, name="bench")
    for n in range(subscriptions):
        endpoint = Endpoint.objects.create(owner=user, url=f"{url}/{n}")
        Subscription.objects.create(topic=topic, endpoint=endpoint, status="confirmed",
                                    delivery_policy={"preset": "workfront"})
    return topic


def engine_run(url: str, messages: int, workers: int, subscriptions: int) -> dict:
    topic = reset(url, subscriptions)
    started = time.perf_counter()
    for n in range(messages):
        message_publish(topic=topic, payload={"n": n})
    publish_rate = messages / (time.perf_counter() - started)
    expected = messages * subscriptions
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, "manage.py", "rqworker",
                               "deliveries", "retries"], cwd=ROOT, env=env)
             for _ in range(workers)]
    procs.append(subprocess.Popen([sys.executable, "manage.py", "herald_cron"], cwd=ROOT, env=env))
    started = time.perf_counter()
    done = 0
    while done < expected:
        time.sleep(0.05)
        done = Delivery.objects.filter(status="succeeded").count()
        if time.perf_counter() - started > 600:
            break
    elapsed = time.perf_counter() - started
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(60)
    return {"deliveries": expected, "succeeded": done, "seconds": round(elapsed, 2),
            "deliveries_per_s": round(done / elapsed, 1), "publish_per_s": round(publish_rate, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--subscriptions", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    receiver, url = start_receiver()
    try:
        print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
              f"Python {platform.python_version()}, batch={os.environ.get('HERALD_BATCH_SIZE', 50)}, "
              f"threads/worker={os.environ.get('HERALD_SENDER_THREADS', 8)}")
        baseline = client_loop(url, 3000)
        print(f"requests.Session loop, 1 thread:           {baseline:8.0f} posts/s")
        for subscriptions in args.subscriptions:
            messages = max(1, args.messages // subscriptions)
            for workers in args.workers:
                result = engine_run(url, messages, workers, subscriptions)
                print(f"engine: {messages} msgs x {subscriptions} subs, {workers} worker(s): "
                      f"{result['deliveries_per_s']:8.1f} deliveries/s  ({result['succeeded']}/{result['deliveries']} "
                      f"in {result['seconds']} s; publish {result['publish_per_s']} msgs/s)", flush=True)
    finally:
        receiver.terminate()


if __name__ == "__main__":
    main()
