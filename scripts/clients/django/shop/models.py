"""The models of the Django check: a foreign key, a many-to-many, the common field types, an index and a unique
constraint."""

import uuid

from django.db import models


class Category(models.Model):
    name = models.CharField(max_length=100, unique=True)


class Product(models.Model):
    sku = models.UUIDField(default=uuid.uuid4, unique=True)
    name = models.CharField(max_length=200, db_index=True)
    description = models.TextField(blank=True)
    price = models.DecimalField(max_digits=10, decimal_places=2)
    stock = models.IntegerField(default=0)
    active = models.BooleanField(default=True)
    attributes = models.JSONField(default=dict)
    created = models.DateTimeField(auto_now_add=True)
    category = models.ForeignKey(Category, on_delete=models.CASCADE, related_name="products")
    related = models.ManyToManyField("self", blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(price__gte=0), name="price_not_negative")]
