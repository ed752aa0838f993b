"""pgcli's completion refresh against a Cambium database (CLIENTS_URI): what an interactive pgcli runs in the
background at start (and after DDL) to learn the schemata, tables and columns, foreign keys, views, types,
databases and functions. Each of pgcli's refreshers runs in turn, synchronously, on pgcli's own executor, and
is a check: `pgcli.completions.<refresher>`. The setup's table must then be among the completer's tables."""

import os
import tempfile

from pgcli.completion_refresher import CompletionRefresher
from pgcli.pgcompleter import PGCompleter
from pgcli.pgexecute import PGExecute

from harness import Checks, uri_from_env


def main() -> None:
    checks = Checks("pgcli.completions")
    executor = PGExecute(dsn=uri_from_env())
    casing_dir = tempfile.TemporaryDirectory(prefix="clients-pgcli-")
    # With a casing file to generate, the casing refresher runs its catalog query too.
    settings = {"casing_file": os.path.join(casing_dir.name, "casing"), "generate_casing_file": True}
    completer = PGCompleter(smart_completion=True, settings=settings)
    for name, refresh in CompletionRefresher.refreshers.items():
        checks.run(name, lambda: refresh(completer, executor))
        if executor.conn is not None and executor.conn.info.transaction_status != 0:
            executor.conn.rollback()  # a failed catalog query leaves the transaction aborted

    def table_listed() -> None:
        tables = completer.dbmetadata["tables"].get("public", {})
        if "pgcli_t" not in tables:
            raise AssertionError(f"pgcli_t not among the completer's tables: {sorted(tables)[:20]}")

    checks.run("table_listed", table_listed, needs=("tables",))
    executor.conn.close()
    casing_dir.cleanup()


if __name__ == "__main__":
    main()
