"""deploy/kubernetes/: every manifest parses, and what they name exists: the ConfigMap and Secret every process
reads, the image's commands (manage.py commands of this project, gunicorn's app), the probes' paths (answered by
this project) and ports, labels that selectors and Services match, a budget for every Deployment that scales, and
nothing but settings Herald or Django reads in the ConfigMap."""

import ast
from pathlib import Path

import pytest
import yaml
from django.core.management import get_commands
from django.test import Client

from delivery.conf import DEFAULTS
from tests.conftest import ROOT

HERE = ROOT / "deploy" / "kubernetes"
SETTINGS_READ = {"DJANGO_SETTINGS_MODULE", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG",
                 "LOG_LEVEL", "DATABASE_POOLER", "REDIS_SENTINELS", "RQ_LOG_LEVEL"}


def documents(name: str) -> list[dict]:
    return [doc for doc in yaml.safe_load_all((HERE / name).read_text()) if doc]


KUSTOMIZATION = documents("kustomization.yaml")[0]
APPLIED = [doc for name in KUSTOMIZATION["resources"] for doc in documents(name)]
SECRET = documents("secret.example.yaml")[0]


def of_kind(kind: str) -> list[dict]:
    return [doc for doc in APPLIED if doc["kind"] == kind]


def pod_specs() -> list[tuple[str, dict]]:
    return [(doc["metadata"]["name"], doc["spec"]["template"]["spec"])
            for doc in of_kind("Deployment") + of_kind("Job")]


def test_every_file_is_applied_or_an_example_and_parses():
    files = {path.name for path in HERE.glob("*.yaml")}
    assert files == {*KUSTOMIZATION["resources"], "kustomization.yaml", "secret.example.yaml"}
    assert {doc["kind"] for doc in APPLIED} == {"ConfigMap", "Job", "Deployment", "Service", "PodDisruptionBudget"}
    assert {d["metadata"]["name"] for d in of_kind("Deployment")} == {"herald-web", "herald-worker", "herald-scheduler"}


def test_what_the_pods_read_exists_and_is_read():
    config = of_kind("ConfigMap")[0]
    for name, spec in pod_specs():
        for container in spec["containers"]:
            assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}},
                                            {"secretRef": {"name": SECRET["metadata"]["name"]}}], name
            assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
            assert container["image"] == "herald"
        assert spec["securityContext"]["runAsNonRoot"] is True
    read = SETTINGS_READ | {f"HERALD_{name}" for name in DEFAULTS}
    assert set(config["data"]) <= read and set(SECRET["stringData"]) <= read


def test_the_commands_exist_in_this_project():
    commands = get_commands()
    for _name, spec in pod_specs():
        for container in spec["containers"]:
            command = container["command"]
            if command[0] == "gunicorn":
                assert command[1] == "project.wsgi" and (ROOT / "project" / "wsgi.py").exists()
                assert "python:project.gunicorn" in command
            else:
                assert command[:2] == ["python", "manage.py"] and command[2] in commands, command


@pytest.mark.django_db
def test_the_probes_name_what_the_processes_answer():
    client = Client()
    for _name, spec in pod_specs():
        for container in spec["containers"]:
            ports = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
            for probe in ("livenessProbe", "readinessProbe"):
                if probe not in container:
                    continue
                found = container[probe]
                if "httpGet" in found:
                    assert found["httpGet"]["port"] in ports
                    assert client.get(found["httpGet"]["path"], HTTP_HOST="10.1.2.3").status_code in (200, 503)
                else:
                    command = found["exec"]["command"]
                    assert command[:3] == ["python", "manage.py", "herald_alive"], command
                    assert command[3] in ("--worker", "--scheduler")
            if "--bind" in container["command"]:
                assert container["command"][container["command"].index("--bind") + 1].endswith(f":{ports['http']}")


def test_selectors_services_and_budgets_match_their_pods():
    labels = {d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"] for d in of_kind("Deployment")}
    for deployment in of_kind("Deployment"):
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels[deployment["metadata"]["name"]].items()
    for service in of_kind("Service"):
        matched = [name for name, found in labels.items() if service["spec"]["selector"].items() <= found.items()]
        assert matched == ["herald-web"]
        assert service["spec"]["ports"][0]["targetPort"] == "http"
    budgeted = {name for budget in of_kind("PodDisruptionBudget") for name, found in labels.items()
                if budget["spec"]["selector"]["matchLabels"].items() <= found.items()}
    assert budgeted == {name for name, d in ((d["metadata"]["name"], d) for d in of_kind("Deployment"))
                        if d["spec"]["replicas"] > 1}


def test_a_workers_grace_covers_its_warm_shutdown():
    worker = next(d for d in of_kind("Deployment") if d["metadata"]["name"] == "herald-worker")
    grace = worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace >= DEFAULTS["SEND_START_WINDOW_SECONDS"] + 30 + 10  # its sends' start window, a 30 s timeout
    scheduler = next(d for d in of_kind("Deployment") if d["metadata"]["name"] == "herald-scheduler")
    assert scheduler["spec"]["replicas"] == 1 and scheduler["spec"]["strategy"]["type"] == "Recreate"


def test_the_image_tag_is_the_release():
    assert KUSTOMIZATION["images"] == [{"name": "herald", "newTag": ast.literal_eval(
        next(line.split("=", 1)[1].strip() for line in Path(ROOT / "delivery" / "__init__.py").read_text().splitlines()
             if line.startswith("VERSION")))}]


def test_the_compose_file_runs_every_process_kind_on_the_image():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "migrate", "web", "worker", "scheduler"}
    commands = get_commands()
    for name in ("migrate", "web", "worker", "scheduler"):
        service = services[name]
        assert service["image"] == f"herald:{KUSTOMIZATION['images'][0]['newTag']}" and service["build"] == "."
        assert set(service["environment"]) <= SETTINGS_READ | {f"HERALD_{key}" for key in DEFAULTS}
        command = service["command"]
        assert command[0] == "gunicorn" or (command[:2] == ["python", "manage.py"] and command[2] in commands)
        depends = service.get("depends_on", {})
        assert (name == "migrate" and depends == {"postgres": {"condition": "service_healthy"}}) or depends == {
            "migrate": {"condition": "service_completed_successfully"}}
    assert services["worker"]["healthcheck"]["test"][-1] == "--worker"
    containerfile = (ROOT / "Containerfile").read_text()
    assert "ARG BASE=docker.io/library/python:3.11-slim" in containerfile and "USER 10001" in containerfile
    assert (ROOT / ".containerignore").read_text() == (ROOT / ".dockerignore").read_text()
