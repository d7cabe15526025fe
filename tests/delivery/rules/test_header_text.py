from delivery.rules.header_text import control_problem


def test_line_breaks_and_other_controls_are_named():
    assert control_problem("https://a.example/x") is None
    assert control_problem("a\nb") == "must not contain control characters (found U+000A, a line break)"
    assert control_problem("a\rb") == "must not contain control characters (found U+000D, a line break)"
    assert control_problem("a\x00") == "must not contain control characters (found U+0000)"
    assert control_problem("a\x7f") == "must not contain control characters (found U+007F)"
    assert control_problem("a\x1b[0m") == "must not contain control characters (found U+001B)"


def test_a_tab_is_allowed_only_where_a_header_value_allows_it():
    assert control_problem("a\tb") == "must not contain control characters (found U+0009, a tab)"
    assert control_problem("a\tb", tab=True) is None
    assert control_problem("a\t\nb", tab=True) == "must not contain control characters (found U+000A, a line break)"


def test_unicode_beyond_ascii_is_not_a_control_character():
    assert control_problem("https://bücher.example/ü") is None
    assert control_problem("\u0085") is None  # C1 controls are percent-encoded in URLs and refused as non-ASCII values
