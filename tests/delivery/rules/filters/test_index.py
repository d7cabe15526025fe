"""A key's values indexed for the operators (pure): each structure exactly, and the sorted-list questions."""

from delivery.rules.filters.index import Index, all_start, starting, starts

VALUES = ["b", "a", "ba", "B", 2, 1.000001, 1, True, None, "10.0.0.2", "::1", "10.0.0.1", "a"]


def test_each_structure_of_the_index():
    index = Index(VALUES)
    assert index.present is True
    assert index.strings == ["10.0.0.1", "10.0.0.2", "::1", "B", "a", "b", "ba"]
    assert index.reversed_strings == ["1.0.0.01", "1::", "2.0.0.01", "B", "a", "ab", "b"]
    assert index.folded == {"10.0.0.1", "10.0.0.2", "::1", "b", "a", "ba"}
    assert index.numbers == [100_000, 200_000]  # 1 and 1.000001 are one number to five decimals
    assert index.addresses == {4: [167772161, 167772162], 6: [1]}
    assert index.identities == {("string", s) for s in index.strings} | {
        ("number", 100_000), ("number", 200_000), ("boolean", True), ("null", None)}
    assert index.others == {("number", 100_000), ("number", 200_000), ("boolean", True)}


def test_a_key_of_nulls_is_not_present():
    assert Index([None, None]).present is False
    assert Index([]).present is False
    assert Index([]).addresses == {4: [], 6: []}


def test_the_sorted_list_questions():
    ordered = ["ab", "abc", "abd", "b", "ba"]
    assert starts(ordered, "abc") is True
    assert starts(ordered, "ac") is False
    assert starts(ordered, "bb") is False
    assert starting(ordered, "ab") == ["ab", "abc", "abd"]
    assert starting(ordered, "c") == []
    assert all_start(ordered, "a") is False
    assert all_start(["ab", "abc"], "a") is True
    assert all_start([], "a") is True
