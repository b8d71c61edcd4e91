"""The orders table."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = [("pgque", "0001_pgque_0_1_0")]  # pgque first: the app sends on it
    operations = [
        migrations.CreateModel(
            name="Order",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False)),
                ("item", models.CharField(max_length=100)),
                ("email", models.EmailField(max_length=254)),
                ("confirmed", models.BooleanField(default=False)),
            ],
        ),
    ]
