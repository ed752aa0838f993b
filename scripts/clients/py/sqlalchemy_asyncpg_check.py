"""SQLAlchemy 2's asyncio ORM on asyncpg (`postgresql+asyncpg`, as FastAPI applications use it) against a Cambium
database (CLIENTS_URI): the dialect's own connect-time queries and JSON codecs, `create_all` and the inspector
through `run_sync`, declarative models with JSONB, ARRAY, Uuid, Numeric and timezone-aware DateTime columns, a
relationship loaded with `selectinload`, JSON and array filters, an update, and a rollback."""

import asyncio
import datetime as dt
import uuid
from decimal import Decimal

from sqlalchemy import Boolean, DateTime, ForeignKey, Numeric, String, Text, Uuid, func, inspect, select
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship, selectinload

from harness import Checks, expect_equal, uri_from_env

URI = uri_from_env()


def async_url(uri: str) -> str:
    """The connection string for SQLAlchemy's asyncpg dialect: asyncpg takes `ssl`, not libpq's `sslmode`."""
    url = uri.replace("postgresql://", "postgresql+asyncpg://", 1).replace("postgres://", "postgresql+asyncpg://", 1)
    return url.replace("sslmode=", "ssl=")


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "saa_authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(80), unique=True)
    books: Mapped[list["Book"]] = relationship(back_populates="author")


class Book(Base):
    __tablename__ = "saa_books"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(Text)
    at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))
    ok: Mapped[bool] = mapped_column(Boolean, default=True)
    price: Mapped[Decimal] = mapped_column(Numeric(10, 2))
    meta: Mapped[dict] = mapped_column(JSONB)
    tags: Mapped[list[str]] = mapped_column(ARRAY(String))
    code: Mapped[uuid.UUID] = mapped_column(Uuid, default=uuid.uuid4)
    author_id: Mapped[int] = mapped_column(ForeignKey("saa_authors.id"))
    author: Mapped[Author] = relationship(back_populates="books")


def run(body):
    async def with_engine():
        engine = create_async_engine(async_url(URI), pool_size=2, max_overflow=0)
        try:
            await body(engine)
        finally:
            await engine.dispose()

    return lambda: asyncio.run(with_engine())


async def check_create_all(engine) -> None:
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.drop_all)
        await conn.run_sync(Base.metadata.create_all)
        names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
        expect_equal("tables", sorted(n for n in names if n.startswith("saa_")), ["saa_authors", "saa_books"])
        columns = await conn.run_sync(
            lambda sync: [(c["name"], str(c["type"])) for c in inspect(sync).get_columns("saa_books")]
        )
        expect_equal(
            "columns",
            columns,
            [
                ("id", "INTEGER"),
                ("title", "TEXT"),
                ("at", "TIMESTAMP"),
                ("ok", "BOOLEAN"),
                ("price", "NUMERIC(10, 2)"),
                ("meta", "JSONB"),
                ("tags", "ARRAY"),
                ("code", "UUID"),
                ("author_id", "INTEGER"),
            ],
        )
        keys = await conn.run_sync(lambda sync: inspect(sync).get_foreign_keys("saa_books"))
        expect_equal("foreign key", [(k["referred_table"], k["constrained_columns"]) for k in keys], [("saa_authors", ["author_id"])])


async def check_orm(engine) -> None:
    async with AsyncSession(engine, expire_on_commit=False) as session:
        author = Author(name="ann")
        session.add(author)
        session.add_all(
            [
                Book(
                    title=f"b{i}",
                    at=dt.datetime(2024, 1, i + 1, 12, tzinfo=dt.timezone.utc),
                    price=Decimal("1.25") * i,
                    meta={"i": i, "even": i % 2 == 0},
                    tags=["x", str(i)],
                    author=author,
                )
                for i in range(3)
            ]
        )
        await session.commit()
        authors = (await session.execute(select(Author).options(selectinload(Author.books)))).scalars().all()
        expect_equal("authors and their books", [(a.name, sorted(b.title for b in a.books)) for a in authors], [("ann", ["b0", "b1", "b2"])])
        count = (await session.execute(select(func.count()).select_from(Book).where(Book.meta["i"].as_integer() >= 1))).scalar()
        expect_equal("a JSON filter", count, 2)
        book = (await session.execute(select(Book).where(Book.tags.contains(["2"])))).scalars().one()
        expect_equal("an array filter", book.title, "b2")
        expect_equal("numeric", book.price, Decimal("2.50"))
        expect_equal("timestamptz", book.at, dt.datetime(2024, 1, 3, 12, tzinfo=dt.timezone.utc))
        expect_equal("jsonb", book.meta, {"i": 2, "even": True})
        if not isinstance(book.code, uuid.UUID):
            raise AssertionError(f"uuid: got {type(book.code).__name__}")
        book.price = Decimal("9.99")
        await session.commit()
        price = (await session.execute(select(Book.price).where(Book.id == book.id))).scalar()
        expect_equal("updated", price, Decimal("9.99"))
        session.add(Author(name="ann"))
        try:
            await session.commit()
        except IntegrityError:
            await session.rollback()
        else:
            raise AssertionError("a duplicate name was committed")
        expect_equal("after the rollback", (await session.execute(select(func.count()).select_from(Author))).scalar(), 1)


def main() -> None:
    checks = Checks("sqlalchemy_asyncpg")
    checks.run("create_all", run(check_create_all))
    checks.run("orm", run(check_orm), needs=("create_all",))


if __name__ == "__main__":
    main()
