"""Django (postgresql backend) against a Cambium database (CLIENTS_URI), with the project in
scripts/clients/django: `migrate` of every app (auth, admin, sessions, contenttypes and the `shop` app), a
second `migrate` that finds nothing to do, model CRUD through the ORM (a foreign key, a many-to-many, JSON,
Decimal, UUID, aggregates, transactions), and a user through django.contrib.auth."""

import io
import os
import sys
from decimal import Decimal
from pathlib import Path

from harness import Checks, describe, expect_equal, uri_from_env

PROJECT = Path(__file__).resolve().parent.parent / "django"
uri_from_env()
sys.path.insert(0, str(PROJECT))
os.environ["DJANGO_SETTINGS_MODULE"] = "clientsite.settings"

import django  # noqa: E402 - configured by the environment set just above

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import IntegrityError, connection, transaction  # noqa: E402
from django.db.models import Count, F, Sum  # noqa: E402
from django.db.migrations.executor import MigrationExecutor  # noqa: E402

from shop.models import Category, Product  # noqa: E402


def check_migrate() -> None:
    out = io.StringIO()
    try:
        call_command("migrate", interactive=False, verbosity=1, stdout=out)
    except Exception as error:
        applying = [line.split("...")[0].strip() for line in out.getvalue().splitlines() if "Applying" in line]
        raise RuntimeError(f"{applying[-1] if applying else 'before any migration'}: {describe(error)}") from error
    finally:
        sys.stderr.write(out.getvalue())
    tables = set(connection.introspection.table_names())
    for table in ("auth_user", "django_admin_log", "django_session", "django_content_type", "shop_product",
                  "shop_product_related"):
        if table not in tables:
            raise AssertionError(f"{table} is missing after migrate; tables: {sorted(tables)}")


def check_migrate_again() -> None:
    executor = MigrationExecutor(connection)
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    expect_equal("migrations left to apply after migrate", [str(m) for m, _ in plan], [])
    out = io.StringIO()
    call_command("migrate", interactive=False, verbosity=1, stdout=out)
    if "No migrations to apply." not in out.getvalue():
        raise AssertionError(f"a second migrate did work: {out.getvalue()!r}")


def check_crud() -> None:
    tools = Category.objects.create(name="tools")
    toys = Category.objects.create(name="toys")
    hammer = Product.objects.create(name="hammer", price=Decimal("9.99"), stock=5, category=tools,
                                    attributes={"weight_g": 500, "tags": ["steel"]})
    saw = Product.objects.create(name="saw", price=Decimal("19.50"), stock=2, category=tools)
    ball = Product.objects.create(name="ball", price=Decimal("3.00"), category=toys, active=False)
    hammer.related.add(saw)
    expect_equal("autoincrement ids", [tools.id, toys.id, hammer.id, saw.id, ball.id], [1, 2, 1, 2, 3])
    fetched = Product.objects.get(sku=hammer.sku)
    expect_equal("JSONField", fetched.attributes, {"weight_g": 500, "tags": ["steel"]})
    expect_equal("DecimalField", fetched.price, Decimal("9.99"))
    expect_equal("JSON key lookup", list(Product.objects.filter(attributes__weight_g=500).values_list("name", flat=True)),
                 ["hammer"])
    expect_equal("many-to-many", [p.name for p in fetched.related.all()], ["saw"])
    Product.objects.filter(category=tools).update(stock=F("stock") + 10)
    expect_equal("F() update", sorted(Product.objects.filter(category=tools).values_list("stock", flat=True)), [12, 15])
    per_category = Category.objects.annotate(n=Count("products"), value=Sum("products__price")).order_by("name")
    expect_equal("annotate with aggregates", [(c.name, c.n, c.value) for c in per_category],
                 [("tools", 2, Decimal("29.49")), ("toys", 1, Decimal("3.00"))])
    expect_equal("filter across the foreign key",
                 list(Product.objects.filter(category__name="toys", active=False).values_list("name", flat=True)),
                 ["ball"])
    try:
        with transaction.atomic():
            Product.objects.create(name="bad", price=Decimal("-1"), category=toys)
    except IntegrityError:
        pass
    else:
        raise AssertionError("a negative price passed the check constraint")
    with transaction.atomic():
        Product.objects.filter(name="ball").delete()
        toys.delete()
    expect_equal("products left", sorted(Product.objects.values_list("name", flat=True)), ["hammer", "saw"])


def check_auth_user() -> None:
    user = User.objects.create_user("ada", "ada@example.com", "correct horse")
    expect_equal("password check", User.objects.get(username="ada").check_password("correct horse"), True)
    User.objects.filter(pk=user.pk).update(is_staff=True)
    expect_equal("staff users", list(User.objects.filter(is_staff=True).values_list("username", flat=True)), ["ada"])


def main() -> None:
    checks = Checks("django")
    checks.run("migrate", check_migrate)
    checks.run("migrate_again", check_migrate_again, needs=("migrate",))
    checks.run("crud", check_crud, needs=("migrate",))
    checks.run("auth_user", check_auth_user, needs=("migrate",))
    connection.close()


if __name__ == "__main__":
    main()
