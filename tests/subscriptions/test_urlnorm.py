import pytest

from subscriptions.urlnorm import InvalidURL, normalize_url


@pytest.mark.parametrize("given, expected", [
    ("HTTP://Example.COM/Path?q=1", "http://example.com/Path?q=1"),
    ("https://example.com:443/x", "https://example.com/x"),
    ("http://example.com:8080", "http://example.com:8080/"),
    ("http://[::1]:80/x#frag", "http://[::1]/x"),
])
def test_normalize(given, expected):
    assert normalize_url(given) == expected


@pytest.mark.parametrize("bad", ["ftp://x/", "http://", "http://a:b@x/", "http://x:99999/"])
def test_rejects(bad):
    with pytest.raises(InvalidURL):
        normalize_url(bad)


def test_hosts_are_stored_as_a_client_connects_to_them():
    assert normalize_url("http://①②⑦.0.0.1:8080/x") == "http://127.0.0.1:8080/x"
    assert normalize_url("https://Bücher.de/hook") == "https://xn--bcher-kva.de/hook"
