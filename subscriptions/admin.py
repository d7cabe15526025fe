from django.contrib import admin

from .models import Endpoint, Subscription, Topic


@admin.register(Topic)
class TopicAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "owner", "created_at"]
    search_fields = ["name", "description", "owner__username"]
    list_filter = ["created_at"]


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["id", "topic", "endpoint", "status", "raw_message_delivery", "created_at"]
    list_filter = ["status", "raw_message_delivery", "endpoint__state"]
    search_fields = ["endpoint__url", "topic__name"]
    list_select_related = ["topic", "endpoint"]
    exclude = ["secret", "confirmation_token_hash"]  # never shown; rotate through the API
    readonly_fields = ["confirmed_at", "confirmation_expires_at", "created_at", "updated_at"]
    raw_id_fields = ["endpoint", "topic"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = ["id", "url", "owner", "state", "consecutive_failures", "window_attempts", "window_failures",
                    "last_success_at", "last_failure_at"]
    list_filter = ["state"]
    search_fields = ["url", "owner__username"]
    readonly_fields = ["consecutive_failures", "window_attempts", "window_failures", "window_started_at",
                       "last_success_at", "last_failure_at", "state_changed_at", "next_probe_at", "created_at"]
