"""Alembic's environment for the clients checks: online migrations only, against CLIENTS_URI through
SQLAlchemy's default PostgreSQL driver (psycopg 3 as of SQLAlchemy 2.1), comparing column types and server
defaults on autogenerate."""

import os
from logging.config import fileConfig

from alembic import context
from sqlalchemy import create_engine, pool

from models import Base

config = context.config
if config.config_file_name is not None:
    fileConfig(config.config_file_name)


def run_migrations_online() -> None:
    engine = create_engine(os.environ["CLIENTS_URI"], poolclass=pool.NullPool)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            compare_type=True,
            compare_server_default=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("the clients checks run Alembic online only")
run_migrations_online()
