"""The newcomer's clock, measured on a fresh clone: how long from nothing to the first delivery.

1. Herald on its own: `git clone` → `make run` (which creates the virtualenv) → `make receiver` → README's walkthrough
   pasted with the banner's token → the receiver prints the first delivery.
2. Herald in a Django project: an empty virtualenv → `pip install` from the checkout → `django-admin startproject` →
   the settings, URLs and receiver view of docs/embedding.md (its first hour) → `migrate` → runserver, a worker and
   the scheduler → subscribe the view with a secret made by `manage.py herald_secret` → `publish()` → the view has
   the event.
3. A customer's portal, in part 2's project with its processes still running: in `manage.py shell`, the shop
   registers a customer as a tenant, opens its topic to tenants, subscribes the view for the tenant, publishes
   for it and prints `portal_link()` → headless Chromium opens the link, clicks through to the endpoint's page
   and waits (the page updates itself) until "Latest deliveries" shows a delivered row.

    python bench/first_hour.py [--only alone|embedded|portal] [--json FILE]

`--only portal` runs part 2 first (part 3 continues in its project) and reports both. Each step's time is printed
beside the total; `--json` writes {"alone"|"embedded"|"portal": {"steps": {step: seconds}, "total": seconds}}.
Ports 8000 and 6379 (make run's) must be free for part 1.
"""

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from delivery.management import localredis  # noqa: E402 (the checkout's, for part 2's Redis)

CHROMIUM = "/usr/bin/chromium"  # Debian's, as in tests/test_browser.py (never `playwright install`)
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(processes) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def start(command, cwd, log: Path, env=None) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=cwd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True, shell=isinstance(command, str))


def herald_alone(work: Path) -> dict:
    """Part 1: clone → first delivery printed by `make receiver`."""
    steps, started = {}, time.monotonic()
    clone = work / "herald"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    steps["git clone"] = time.monotonic() - started
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    run_log, receiver_log = work / "make-run.log", work / "receiver.log"
    processes = [start(["make", "run"], clone, run_log, env)]
    try:
        token = wait_for(lambda: re.search(r"API token  (\w{40})", run_log.read_text()), 600, "make run's banner")
        steps["make run (install, migrate, start)"] = time.monotonic() - started - sum(steps.values())
        processes.append(start(["make", "receiver"], clone, receiver_log, env))
        wait_for(lambda: "receiving webhooks" in receiver_log.read_text(), 120, "make receiver")
        steps["make receiver"] = time.monotonic() - started - sum(steps.values())
        readme = (clone / "README.md").read_text()
        script = readme.split("<!-- walkthrough -->")[1].split("```sh")[1].split("```")[0]
        script = script.replace("paste-the-token-here", token.group(1))
        subprocess.run(["bash", "-c", f"set -e -o pipefail\n{script}"], check=True, capture_output=True, timeout=120)
        wait_for(lambda: "webhook-id" in receiver_log.read_text().lower(), 60, "the first delivery")
        steps["README walkthrough → first delivery"] = time.monotonic() - started - sum(steps.values())
    finally:
        stop(processes)
    return {"steps": steps, "total": time.monotonic() - started}


SETTINGS = '''
# --- docs/embedding.md, "2. Settings" ---
import os
INSTALLED_APPS += ["rest_framework", "rest_framework.authtoken", "django_filters", "drf_spectacular",
                   "drf_spectacular_sidecar", "django_rq", "subscriptions", "delivery", "hooks"]
REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
RQ_QUEUES = {"deliveries": {"URL": REDIS_URL}, "retries": {"URL": REDIS_URL}}
STATIC_ROOT = BASE_DIR / "staticfiles"
HERALD_ALLOWED_NETWORKS = ["127.0.0.0/8", "::1/128"]   # a receiver on this machine, in development
HERALD_RECEIVER_SECRETS = [os.environ["HERALD_SECRET"]]
HERALD_PUBLIC_URL = os.environ["HERALD_PUBLIC_URL"]
'''
URLS = '''
from django.contrib import admin
from django.urls import include, path
from hooks.views import order_events

urlpatterns = [path("admin/", admin.site.urls), path("herald/", include("delivery.urls")),
               path("hooks/orders/", order_events)]
'''
VIEW = '''
import json, os
from delivery.receiver import webhook_receiver

@webhook_receiver
def order_events(request, event):
    with open(os.environ["RECEIVED_FILE"], "a") as received:
        received.write(json.dumps({"type": event.type, "data": event.data}) + "\\n")
'''
FIRST_EVENT = '''
from django.contrib.auth import get_user_model
from delivery.engine.accounts.subscribing import subscription_create, topic_create
import os, time
shop, _ = get_user_model().objects.get_or_create(username="shop")
topic, _ = topic_create(owner=shop, name="orders")
subscription, _ = subscription_create(topic=topic, endpoint=os.environ["HOOK"], secret=os.environ["HERALD_SECRET"])
deadline = time.monotonic() + 60
while subscription.status != "confirmed" and time.monotonic() < deadline:
    time.sleep(0.1)
    subscription.refresh_from_db()
print("subscription", subscription.status)
from delivery.events import publish
print("published", publish(topic, {"order": 1}, event_type="order.placed").id)
'''


@contextlib.contextmanager
def herald_embedded(work: Path):
    """Part 2: an empty virtualenv → the first event received by a decorated view of a new project. Yields its
    figures and the running project (for part 3); the processes and Redis stop when the block ends."""
    steps, started = {}, time.monotonic()
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    source = work / "source"  # what `pip install <git URL>` sees (and building it writes nothing into the checkout)
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("subscriptions", "delivery"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{source}[postgres]"],
                   check=True, timeout=900)
    steps["pip install (from the checkout)"] = time.monotonic() - started
    project = work / "shopsite"
    subprocess.run([str(venv / "bin" / "django-admin"), "startproject", "shopsite", str(work)], check=True)
    (work / "hooks").mkdir()
    (work / "hooks" / "__init__.py").write_text("")
    (work / "hooks" / "views.py").write_text(VIEW)
    with (project / "settings.py").open("a") as settings:
        settings.write(SETTINGS)
    (project / "urls.py").write_text(URLS)
    steps["startproject + embedding.md's settings, URLs and view"] = time.monotonic() - started - sum(steps.values())
    redis_port, web_port = free_port(), free_port()
    redis = localredis.start(redis_port, str(work / "redis"))
    secret = subprocess.run([python, "manage.py", "herald_secret"], cwd=work, capture_output=True, text=True,
                            env={**os.environ, "HERALD_SECRET": "x", "HERALD_PUBLIC_URL": "x",
                                 "DJANGO_SETTINGS_MODULE": "shopsite.settings"}).stdout.strip()
    received = work / "received.jsonl"
    origin = f"http://127.0.0.1:{web_port}"
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE", "PYTHONPATH")}
    # The origin alone: Herald's links are built as HERALD_PUBLIC_URL + a reversed path, which has /herald/ already.
    env.update(REDIS_URL=f"redis://127.0.0.1:{redis_port}/0", HERALD_SECRET=secret, RECEIVED_FILE=str(received),
               HERALD_PUBLIC_URL=origin, HOOK=f"{origin}/hooks/orders/", DJANGO_SETTINGS_MODULE="shopsite.settings")
    processes = []
    try:
        subprocess.run([python, "manage.py", "migrate", "-v0"], cwd=work, env=env, check=True)
        steps["herald_secret + migrate"] = time.monotonic() - started - sum(steps.values())
        processes += [start([python, "manage.py", "runserver", "--noreload", f"127.0.0.1:{web_port}"], work,
                            work / "web.log", env),
                      start([python, "manage.py", "rqworker", "deliveries", "retries", "--worker-class",
                             "delivery.engine.sending.worker.HeraldWorker"], work, work / "worker.log", env),
                      start([python, "manage.py", "herald_cron"], work, work / "cron.log", env)]
        wait_for(lambda: "dispatching" in (work / "cron.log").read_text(), 120, "the scheduler")
        steps["runserver, worker, scheduler up"] = time.monotonic() - started - sum(steps.values())
        shell = subprocess.run([python, "manage.py", "shell", "-c", FIRST_EVENT], cwd=work, env=env,
                               capture_output=True, text=True, timeout=120)
        assert "subscription confirmed" in shell.stdout, shell.stdout + shell.stderr
        wait_for(lambda: received.exists() and "order.placed" in received.read_text(), 60, "the view's event")
        steps["subscribe with the secret (confirmed) → publish → the view has it"] = (
            time.monotonic() - started - sum(steps.values()))
        yield ({"steps": steps, "total": time.monotonic() - started},
               {"python": python, "work": work, "env": env, "origin": origin})
    finally:
        stop(processes)
        redis.terminate()


TENANT_EVENT = '''
from django.contrib.auth import get_user_model
from delivery.engine.accounts.subscribing import subscription_create, topic_update
from delivery.events import publish
from delivery.tenants import portal_link, tenant_create
from subscriptions.models import Topic
import os, time
shop = get_user_model().objects.get(username="shop")
acme, _ = tenant_create(owner=shop, external_id="acme", name="Acme Ltd")
topic = topic_update(topic=Topic.objects.get(owner=shop, name="orders"), open_to_tenants=True)
subscription, _ = subscription_create(topic=topic, endpoint=os.environ["HOOK"], tenant=acme,
                                      secret=os.environ["HERALD_SECRET"])
deadline = time.monotonic() + 60
while subscription.status != "confirmed" and time.monotonic() < deadline:
    time.sleep(0.1)
    subscription.refresh_from_db()
print("subscription", subscription.status)
print("published", publish(topic, {"invoice": 1}, event_type="invoice.paid", tenant="acme").id)
print("portal", portal_link(acme))
'''


def customer_portal(project: dict) -> dict:
    """Part 3: the shop gives a customer a portal link → the customer's browser shows a first delivery."""
    steps, started = {}, time.monotonic()
    shell = subprocess.run([project["python"], "manage.py", "shell", "-c", TENANT_EVENT], cwd=project["work"],
                           env=project["env"], capture_output=True, text=True, timeout=120)
    assert "subscription confirmed" in shell.stdout, shell.stdout + shell.stderr
    link = re.search(r"^portal (\S+)$", shell.stdout, re.M).group(1)  # a full URL, from HERALD_PUBLIC_URL
    steps["shell: tenant, open topic, subscribe (confirmed), publish, portal_link"] = time.monotonic() - started
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 (parts 1 and 2 run without Playwright)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        page = browser.new_page()
        page.set_default_timeout(20_000)
        steps["Chromium started"] = time.monotonic() - started - sum(steps.values())
        page.goto(link)
        page.get_by_role("link", name=project["env"]["HOOK"]).first.click()
        page.wait_for_selector("text=Latest deliveries")
        steps["portal link → the endpoint's page"] = time.monotonic() - started - sum(steps.values())
        page.wait_for_selector("td.status-succeeded", timeout=60_000)  # the page updates itself while one is due
        steps["a delivered row in Latest deliveries"] = time.monotonic() - started - sum(steps.values())
        total = time.monotonic() - started
        browser.close()
    return {"steps": steps, "total": total}


def report(name: str, result: dict) -> None:
    print(f"\n{name}: {result['total']:.0f} s")
    for step, seconds in result["steps"].items():
        print(f"  {seconds:6.1f} s  {step}")


def fresh(name: str):
    return tempfile.TemporaryDirectory(prefix=f"herald-first-hour-{name}-", ignore_cleanup_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--only", choices=("alone", "embedded", "portal"))
    args = parser.parse_args()
    results = {}
    if args.only in (None, "alone"):
        with fresh("alone") as work:
            results["alone"] = herald_alone(Path(work))
        report("alone", results["alone"])
    if args.only in (None, "embedded", "portal"):
        with fresh("embedded") as work, herald_embedded(Path(work)) as (embedded, project):
            results["embedded"] = embedded
            report("embedded", embedded)
            if args.only != "embedded":
                results["portal"] = customer_portal(project)
                report("portal", results["portal"])
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
