"""rules/answers: what a receiver sent, read by total functions (a value or a problem, never an exception)."""

from delivery.rules import answers


def test_json_readers_turn_every_failure_into_a_problem():
    assert answers.json_value("[" * 4096) == (None, "nested too deeply")
    assert answers.json_value(b"\xff\xfe")[1].startswith("not JSON")
    assert answers.json_value(None) == (None, "not text (NoneType)")
    assert answers.finite_number("²", 7.0) == (7.0, "not a number")
    assert answers.finite_number(10**400, 7.0) == (7.0, "not a number")
    assert answers.finite_number("1e400", 7.0) == (7.0, "not a finite number")
    assert answers.finite_number(True, 7.0) == (7.0, "a boolean, not a number")
    assert answers.finite_number("42", 7.0) == (42.0, "")
    assert answers.json_value("[1]" + " " * 70000) == (None, "longer than 65536 characters")
    assert answers.json_value("[1]" + " " * 70000, max_chars=100000) == ([1], "")
