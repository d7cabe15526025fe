"""The operator console's page of topics: the delivery policy edited with the schedule it produces shown, written
through the service the API calls (console/service_forms.py), and deleted through it too."""

from django.contrib import admin

from delivery.engine.accounts import removal, subscribing
from delivery.engine.state.effective import policy_for
from delivery.rules.policy import PolicyError
from delivery.web.console.deletes import ServiceDeletes
from delivery.web.console.schedules import schedule_table
from delivery.web.console.service_forms import ServiceAdmin, ServiceForm
from subscriptions.models import Topic


class TopicForm(ServiceForm):
    """Written through the API's services (subscribing.topic_create/topic_update): a policy is checked there,
    every error named, nothing stored."""

    def create(self, changes):
        return self.new_only(subscribing.topic_create(**changes), "name",
                             lambda topic: f"{topic.owner} already has a topic named {topic.name!r}.")

    def write(self, stored, changes):
        return subscribing.topic_update(topic=stored, **changes)


@admin.register(Topic)
class TopicAdmin(ServiceAdmin, ServiceDeletes, admin.ModelAdmin):
    form = TopicForm
    list_display = ["id", "name", "owner", "created_at"]
    search_fields = ["name", "description", "owner__username"]
    list_filter = ["created_at"]
    readonly_fields = ["schedule"]

    @admin.display(description="schedule (effective policy for subscriptions without their own)")
    def schedule(self, obj):
        try:
            return schedule_table(policy_for(None, obj.delivery_policy if obj else None))
        except PolicyError as exc:
            return f"invalid policy: {exc}"

    def delete_model(self, request, obj):
        removal.topic_delete(topic=obj)  # refused (shown) while any of its deliveries is being sent
