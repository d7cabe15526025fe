"""The schedule a delivery policy produces, as the topics' and subscriptions' pages show it beside the policy:
attempt by attempt, with its limits and what ends it."""

from django.utils.html import format_html, format_html_join

from delivery.rules.backoff import human


def schedule_table(policy):
    """The schedule a policy produces, as the admin shows it beside the policy field."""
    rows = policy.schedule()
    shown = rows if len(rows) <= 14 else rows[:10] + [None] + rows[-3:]
    body = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", (
        ("…", "…", "…") if row is None else (row["attempt"], human(row["delay"]), human(row["offset"]))
        for row in shown))
    limits = (f"max attempts {policy.max_attempts or '—'} · time-to-live "
              f"{human(policy.max_age_seconds) if policy.max_age_seconds else '—'} · jitter ±{policy.jitter:.0%} · "
              f"{policy.schedule_end(rows)}")
    return format_html('<table class="herald-schedule"><thead><tr><th>attempt</th><th>delay</th><th>offset</th>'
                       "</tr></thead><tbody>{}</tbody></table><p class=\"help\">{}</p>", body, limits)
