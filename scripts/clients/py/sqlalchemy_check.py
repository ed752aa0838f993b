"""SQLAlchemy 2 ORM against a Cambium database (CLIENTS_URI) through one driver (argument: psycopg or psycopg2):
declarative models with autoincrement keys, String, Text, DateTime(timezone=True), Boolean, Numeric, JSON, a
ForeignKey with relationships both ways; create_all, CRUD through a Session, and the inspector (tables,
columns with their types, primary keys, foreign keys, indexes); drop_all."""

import datetime as dt
import sys
from decimal import Decimal

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Numeric, String, Text, create_engine, func, inspect, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship, selectinload

from harness import Checks, expect_equal, uri_from_env

DRIVER = sys.argv[1] if len(sys.argv) > 1 else "psycopg"
if DRIVER not in ("psycopg", "psycopg2"):
    sys.exit(f"unknown driver {DRIVER!r}: psycopg or psycopg2")
URL = uri_from_env().replace("postgresql://", f"postgresql+{DRIVER}://", 1)
WHEN = dt.datetime(2024, 2, 29, 13, 14, 15, tzinfo=dt.timezone.utc)


class Base(DeclarativeBase):
    pass


class Author(Base):
    __tablename__ = "sa_authors"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    bio: Mapped[str | None] = mapped_column(Text)
    joined: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    books: Mapped[list["Book"]] = relationship(back_populates="author", cascade="all, delete-orphan")


class Book(Base):
    __tablename__ = "sa_books"
    id: Mapped[int] = mapped_column(primary_key=True)
    author_id: Mapped[int] = mapped_column(ForeignKey("sa_authors.id", ondelete="CASCADE"), index=True)
    title: Mapped[str] = mapped_column(String(200))
    price: Mapped[Decimal] = mapped_column(Numeric(10, 2))
    meta: Mapped[dict] = mapped_column(JSON)
    published: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    author: Mapped[Author] = relationship(back_populates="books")


engine = create_engine(URL, connect_args={"connect_timeout": 10})


def check_connect() -> None:
    with engine.connect() as conn:
        expect_equal("SELECT 1", conn.execute(select(1)).scalar(), 1)
        if engine.dialect.server_version_info[0] != 15:
            raise AssertionError(f"server_version_info {engine.dialect.server_version_info}, want (15, …)")


def check_create_all() -> None:
    Base.metadata.drop_all(engine)
    Base.metadata.create_all(engine)
    with engine.connect() as conn:
        for table in ("sa_authors", "sa_books"):
            if not engine.dialect.has_table(conn, table):
                raise AssertionError(f"has_table({table!r}) is false after create_all")


def check_insert() -> None:
    with Session(engine) as session:
        ada = Author(name="Ada", bio="analyst")
        ada.books = [
            Book(title="Notes", price=Decimal("12.50"), meta={"tags": ["a", "b"], "n": 1}, published=WHEN),
            Book(title="Sketch", price=Decimal("0.99"), meta={}),
        ]
        bob = Author(name="Bob", active=False)
        session.add_all([ada, bob])
        session.commit()
        expect_equal("autoincrement ids of the authors", (ada.id, bob.id), (1, 2))
        expect_equal("autoincrement ids of the books", sorted(b.id for b in ada.books), [1, 2])
        if not isinstance(ada.joined, dt.datetime) or ada.joined.tzinfo is None:
            raise AssertionError(f"server default now(): got {ada.joined!r}, want an aware datetime")


def check_select() -> None:
    with Session(engine) as session:
        ada = session.scalars(select(Author).where(Author.name == "Ada").options(selectinload(Author.books))).one()
        expect_equal("active default", ada.active, True)
        books = sorted(ada.books, key=lambda b: b.id)
        expect_equal("titles through the relationship", [b.title for b in books], ["Notes", "Sketch"])
        expect_equal("Numeric", books[0].price, Decimal("12.50"))
        expect_equal("JSON", books[0].meta, {"tags": ["a", "b"], "n": 1})
        expect_equal("DateTime(timezone=True)", books[0].published, WHEN)
        expect_equal("a NULL DateTime", books[1].published, None)
        joined = session.execute(
            select(Author.name, func.count(Book.id), func.sum(Book.price))
            .join(Book, isouter=True)
            .group_by(Author.name)
            .order_by(Author.name)
        ).all()
        expect_equal("a join with aggregates", [tuple(r) for r in joined],
                     [("Ada", 2, Decimal("13.49")), ("Bob", 0, None)])
        expect_equal("many-to-one", session.get(Book, 2).author.name, "Ada")


def check_update() -> None:
    with Session(engine) as session:
        book = session.scalars(select(Book).where(Book.title == "Sketch")).one()
        book.price = Decimal("1.99")
        book.meta = {"edited": True}
        session.commit()
    with Session(engine) as session:
        book = session.scalars(select(Book).where(Book.title == "Sketch")).one()
        expect_equal("updated price", book.price, Decimal("1.99"))
        expect_equal("updated JSON", book.meta, {"edited": True})


def check_delete() -> None:
    with Session(engine) as session:
        session.delete(session.scalars(select(Author).where(Author.name == "Ada")).one())
        session.commit()
        expect_equal("books left after deleting their author", session.scalar(select(func.count(Book.id))), 0)
        expect_equal("authors left", session.scalars(select(Author.name)).all(), ["Bob"])


def check_inspector_tables() -> None:
    tables = set(inspect(engine).get_table_names())
    if not {"sa_authors", "sa_books"} <= tables:
        raise AssertionError(f"get_table_names: {sorted(tables)}, want sa_authors and sa_books among them")


def column_types(table: str) -> dict[str, str]:
    return {c["name"]: str(c["type"]) for c in inspect(engine).get_columns(table)}


def check_inspector_columns() -> None:
    expect_equal("columns of sa_authors", column_types("sa_authors"), {
        "id": "INTEGER", "name": "VARCHAR(100)", "bio": "TEXT", "joined": "TIMESTAMP", "active": "BOOLEAN"})
    expect_equal("columns of sa_books", column_types("sa_books"), {
        "id": "INTEGER", "author_id": "INTEGER", "title": "VARCHAR(200)", "price": "NUMERIC(10, 2)",
        "meta": "JSON", "published": "TIMESTAMP"})
    columns = {c["name"]: c for c in inspect(engine).get_columns("sa_authors")}
    expect_equal("timezone of sa_authors.joined", getattr(columns["joined"]["type"], "timezone", None), True)
    expect_equal("nullable of sa_authors.name", columns["name"]["nullable"], False)
    expect_equal("nullable of sa_authors.bio", columns["bio"]["nullable"], True)
    if not columns["id"].get("autoincrement") or "nextval" not in str(columns["id"].get("default")):
        raise AssertionError(f"sa_authors.id: autoincrement {columns['id'].get('autoincrement')!r}, "
                             f"default {columns['id'].get('default')!r}, want a serial (nextval) default")


def check_inspector_pks() -> None:
    for table in ("sa_authors", "sa_books"):
        expect_equal(f"primary key of {table}",
                     inspect(engine).get_pk_constraint(table)["constrained_columns"], ["id"])


def check_inspector_fks() -> None:
    fks = inspect(engine).get_foreign_keys("sa_books")
    got = [(fk["constrained_columns"], fk["referred_table"], fk["referred_columns"],
            fk.get("options", {}).get("ondelete")) for fk in fks]
    expect_equal("foreign keys of sa_books", got, [(["author_id"], "sa_authors", ["id"], "CASCADE")])


def check_inspector_indexes() -> None:
    indexes = inspect(engine).get_indexes("sa_books")
    got = [(i["name"], i["column_names"], bool(i["unique"])) for i in indexes]
    expect_equal("indexes of sa_books", got, [("ix_sa_books_author_id", ["author_id"], False)])
    uniques = inspect(engine).get_unique_constraints("sa_authors")
    expect_equal("unique constraints of sa_authors", [u["column_names"] for u in uniques], [["name"]])


def check_drop_all() -> None:
    Base.metadata.drop_all(engine)
    left = {"sa_authors", "sa_books"} & set(inspect(engine).get_table_names())
    expect_equal("tables left after drop_all", left, set())


def main() -> None:
    checks = Checks(f"sqlalchemy.{DRIVER}")
    checks.run("connect", check_connect)
    checks.run("create_all", check_create_all, needs=("connect",))
    checks.run("insert", check_insert, needs=("create_all",))
    checks.run("select", check_select, needs=("insert",))
    checks.run("update", check_update, needs=("insert",))
    checks.run("inspector.tables", check_inspector_tables, needs=("create_all",))
    checks.run("inspector.columns", check_inspector_columns, needs=("create_all",))
    checks.run("inspector.pks", check_inspector_pks, needs=("create_all",))
    checks.run("inspector.fks", check_inspector_fks, needs=("create_all",))
    checks.run("inspector.indexes", check_inspector_indexes, needs=("create_all",))
    checks.run("delete", check_delete, needs=("insert",))
    checks.run("drop_all", check_drop_all, needs=("create_all",))
    engine.dispose()


if __name__ == "__main__":
    main()
