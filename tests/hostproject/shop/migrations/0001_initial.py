from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        migrations.CreateModel(name="Customer", fields=[
            ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ("name", models.CharField(max_length=100)),
            ("email", models.EmailField(max_length=254)),
        ]),
        migrations.CreateModel(name="Order", fields=[
            ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ("total", models.DecimalField(decimal_places=2, max_digits=10)),
            ("customer", models.ForeignKey(on_delete=models.deletion.CASCADE, to="shop.customer")),
        ]),
        migrations.CreateModel(name="ReceivedEvent", fields=[
            ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
            ("event_id", models.CharField(max_length=100)),
            ("type", models.CharField(max_length=100)),
            ("data", models.JSONField()),
        ]),
    ]
