from django.db import models


class Customer(models.Model):
    name = models.CharField(max_length=100)
    email = models.EmailField()


class Order(models.Model):
    customer = models.ForeignKey(Customer, on_delete=models.CASCADE)
    total = models.DecimalField(max_digits=10, decimal_places=2)


class ReceivedEvent(models.Model):
    """What the shop's own webhook receiver was handed."""

    event_id = models.CharField(max_length=100)
    type = models.CharField(max_length=100)
    data = models.JSONField()
