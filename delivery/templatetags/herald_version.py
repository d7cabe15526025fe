"""`{% load herald_version %}{% herald_version %}`: Herald's version, for the admin's footer."""

from django import template

from delivery import VERSION

register = template.Library()


@register.simple_tag
def herald_version() -> str:
    return VERSION
