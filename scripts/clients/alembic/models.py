"""The models the Alembic check autogenerates a revision from: two tables, a foreign key, an index, a unique
constraint, a server default, and the common column types."""

import datetime as dt
from decimal import Decimal

from sqlalchemy import Boolean, DateTime, ForeignKey, Numeric, String, Text, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Customer(Base):
    __tablename__ = "al_customers"
    id: Mapped[int] = mapped_column(primary_key=True)
    email: Mapped[str] = mapped_column(String(200), unique=True)
    note: Mapped[str | None] = mapped_column(Text)
    vip: Mapped[bool] = mapped_column(Boolean, server_default="false")
    created: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Invoice(Base):
    __tablename__ = "al_invoices"
    id: Mapped[int] = mapped_column(primary_key=True)
    customer_id: Mapped[int] = mapped_column(ForeignKey("al_customers.id"), index=True)
    total: Mapped[Decimal] = mapped_column(Numeric(12, 2))
