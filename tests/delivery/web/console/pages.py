"""Reading the console's pages as an operator does: the buttons offered, the messages shown, the words on the page."""

import re


def buttons(page: str) -> list[str]:
    """The names of the buttons an object's page offers, in order."""
    return re.findall(r'<button type="submit" class="herald-button" id="herald-([a-z-]+)"', page)


def shown_messages(response) -> list[tuple[str, str]]:
    """(level, text) of the messages a page shows after an action or a button (the response followed there)."""
    return [(message.level_tag, str(message)) for message in response.context["messages"]]


def words(page: str) -> str:
    """The page's text without its markup, its whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", page).split())


def form_errors(page: str) -> dict[str, list[str]]:
    """{field: its errors} of a form page the admin sent back ("__all__": the errors of no one field)."""
    found = {}
    for nonfield, field, items in re.findall(
            r'<ul class="errorlist( nonfield)?"(?: id="id_(\w+)_error")?>(.*?)</ul>', page, re.S):
        found.setdefault("__all__" if nonfield else field, []).extend(re.findall(r"<li>(.*?)</li>", items, re.S))
    return found
