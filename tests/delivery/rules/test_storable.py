"""What PostgreSQL can store: cleaning what receivers send, refusing what users send."""


from delivery.rules.storable import MAX_JSON_DEPTH, TRUNCATED_HEADER, clean_headers, clean_text, json_problems


def test_clean_text_removes_nul_and_replaces_lone_surrogates():
    assert clean_text("a\x00b") == "ab"
    assert clean_text("x\ud800y") == "x?y"
    assert clean_text("plain ✓") == "plain ✓"
    assert clean_text("abcdef", 3) == "abc"


def test_clean_headers_cleans_names_and_values():
    assert clean_headers({"X-Nul": "a\x00b", "X-\x00Name": "v", "X-Sur": "\udfff"}) == {
        "X-Nul": "ab", "X-Name": "v", "X-Sur": "?"}


def test_clean_headers_bounds_total_size_and_marks_the_record_partial():
    huge = {f"X-Big-{n}": "v" * 65_000 for n in range(95)}  # 10 names of 7 characters, 85 of 8; 4 bytes each more
    kept = clean_headers({"Content-Type": "text/plain", **huge})
    assert kept["Content-Type"] == "text/plain"
    assert kept[TRUNCATED_HEADER] == "95 more headers (6176130 bytes) not stored"
    assert sum(len(k) + len(v) for k, v in kept.items()) < 8192 + 200


def test_clean_headers_bounds_the_count():
    kept = clean_headers({f"h{n}": "1" for n in range(150)})
    assert len(kept) == 101 and kept[TRUNCATED_HEADER].startswith("50 more headers")


def test_json_problems_name_the_path_of_each_unstorable_value():
    value = {"payload": {"a": ["ok", "bad\x00"], "b\x00": 1, "c": float("inf")}, "attributes": {"s": "\ud800"}}
    assert sorted(json_problems(value)) == [
        ("attributes.s", "contains a lone surrogate (e.g. \\ud800), which is not valid Unicode"),
        ("payload", "a key contains a NUL character (\\u0000), which cannot be stored"),
        ("payload.a[1]", "contains a NUL character (\\u0000), which cannot be stored"),
        ("payload.c", "must be a finite number"),
    ]


def test_json_problems_accept_storable_values():
    assert json_problems({"a": [1, 2.5, "ü", None, True, {"b": []}]}) == []


def test_json_problems_report_deep_nesting_without_recursing():
    deep = nested(5000)
    assert json_problems({"payload": deep}) == [("payload" + "[0]" * (MAX_JSON_DEPTH - 1),
                                                 f"nested more than {MAX_JSON_DEPTH} levels deep")]
    assert json_problems({"payload": nested(MAX_JSON_DEPTH - 2)}) == []


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value
