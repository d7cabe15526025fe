"""Event versions' arithmetic (rules/event_versions.py): the version an endpoint receives, the down-converters
between versions, and what a new version or a publish may name."""

from delivery.rules.event_versions import (
    Version,
    down_steps,
    latest,
    new_version_problem,
    published_problem,
    received,
)

NAMES = ["2026-01-01", "2026-06-01", "2026-11-01"]
VERSIONS = [Version("2026-01-01"), Version("2026-06-01", "to-january"), Version("2026-11-01", "to-june")]


def test_an_endpoint_receives_the_newest_version_not_after_its_pin():
    assert received(NAMES, "") == "2026-11-01"  # no pin: the latest
    assert received(NAMES, "2026-06-01") == "2026-06-01"
    assert received(NAMES, "2026-09-30") == "2026-06-01"  # a pin between versions: the one before it
    assert received(NAMES, "2025-12-31") == "2026-01-01"  # before every version: the oldest
    assert received(NAMES, "2027-01-01") == "2026-11-01"
    assert received([], "2026-06-01") == ""  # a type without versions


def test_a_payload_comes_down_one_version_at_a_time_newest_first():
    assert down_steps(VERSIONS, "2026-11-01", "2026-01-01") == (
        ("down-converter of 2026-11-01", "to-june"), ("down-converter of 2026-06-01", "to-january"))
    assert down_steps(VERSIONS, "2026-11-01", "2026-06-01") == (("down-converter of 2026-11-01", "to-june"),)
    assert down_steps(VERSIONS, "2026-06-01", "2026-06-01") == ()
    assert down_steps(VERSIONS, "2026-01-01", "2026-11-01") == ()  # published older: delivered as published
    assert down_steps(VERSIONS, "", "2026-06-01") == ()


def test_what_a_publish_may_name():
    assert published_problem(NAMES, None, "order.created") is None
    assert published_problem(NAMES, "2026-06-01", "order.created") is None
    assert "is not a version of 'order.created'" in published_problem(NAMES, "2026-07-01", "order.created")
    assert "has no versions" in published_problem([], "2026-07-01", "order.created")
    assert latest(NAMES) == "2026-11-01" and latest([]) == ""


def test_a_new_version_comes_after_the_others_with_its_down_converter():
    assert new_version_problem([], "2026-01-01", "") == {}
    assert "first version" in new_version_problem([], "2026-01-01", "function handler(w) { return w; }")[
        "down_converter"]
    assert new_version_problem(NAMES, "2027-01-01", "function handler(w) { return w; }") == {}
    assert "give the JavaScript" in new_version_problem(NAMES, "2027-01-01", " ")["down_converter"]
    assert "come in order" in new_version_problem(NAMES, "2026-03-01", "code")["name"]
    assert "exists" in new_version_problem(NAMES, "2026-06-01", "code")["name"]
