"""The database spells the vocabulary as common/vocab.h does (DESIGN.md section 11). Everything is
read from the migrated database itself (the catalog, the tables, the functions' bodies), never
from the migration files, so it holds wherever a table or function is defined: the job statuses
and which are terminal, the columns constrained to a status (by a foreign key to job_statuses or a
CHECK listing names), the events of the state machine, and every status or event a SQL function
compares with or fires."""
import json
import os
import re

import harness


def _c_vocab():
    """The C vocabulary as vocab-dump wrote it at build time."""
    with open(os.path.join(harness.BUILD_DIR, "vocab", "vocab.json")) as f:
        return json.load(f)


def _sql(pg, server, sql):
    db = server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]
    return pg.psql(sql, db=db)


def _rows(pg, server, sql):
    return [line.split("|") for line in _sql(pg, server, sql).splitlines()]


def test_job_statuses_table_is_the_c_list(server, pg):
    c = _c_vocab()
    rows = dict(_rows(pg, server, "SELECT name, terminal FROM job_statuses"))
    assert sorted(rows) == sorted(c["job_statuses"])
    assert sorted(n for n, t in rows.items() if t == "t") == sorted(c["terminal_job_statuses"])


# Status columns and the C list each must hold.
STATUS_COLUMNS = {("jobs", "status"): "job_statuses", ("attempts", "status"): "job_statuses",
                  ("workers", "status"): "worker_statuses", ("nodes", "status"): "node_statuses",
                  ("checkpoints", "status"): "checkpoint_statuses",
                  ("sweeps", "status"): "sweep_statuses",
                  ("job_stream", "kind"): "stream_kinds", ("job_stream", "stream"): "log_streams"}


def test_status_columns_allow_exactly_the_c_statuses(server, pg):
    c = _c_vocab()
    for (table, column), key in STATUS_COLUMNS.items():
        defs = [r[0] for r in _rows(pg, server, (
            "SELECT pg_get_constraintdef(k.oid) FROM pg_constraint k "
            "JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey) "
            f"WHERE k.conrelid = '{table}'::regclass AND a.attname = '{column}' "
            "AND k.contype IN ('c', 'f')"))]
        fkeys = [d for d in defs if d.startswith("FOREIGN KEY")]
        checks = [sorted(re.findall(r"'([^']*)'", d)) for d in defs if d.startswith("CHECK")]
        if fkeys:
            assert key == "job_statuses" and all("REFERENCES job_statuses(name)" in d
                                                 for d in fkeys), (table, column, fkeys)
        else:
            assert checks == [sorted(c[key])], f"{table}.{column}: {defs} vs C {c[key]}"


def test_state_machine_events_are_the_c_events(server, pg):
    c = _c_vocab()
    events = _sql(pg, server, "SELECT DISTINCT event FROM job_transitions ORDER BY 1").split()
    assert events == sorted(c["job_events"])


def test_functions_compare_with_and_fire_only_c_names(server, pg):
    c = _c_vocab()
    statuses = set().union(*(c[k] for k in ("job_statuses", "worker_statuses", "node_statuses",
                                           "checkpoint_statuses")))
    bodies = _sql(pg, server, "SELECT string_agg(p.prosrc, E'\\n') FROM pg_proc p "
                              "JOIN pg_namespace n ON n.oid = p.pronamespace "
                              "WHERE n.nspname = current_schema() AND p.prolang <> "
                              "(SELECT oid FROM pg_language WHERE lanname = 'c')")
    assert "ty_job_transition" in bodies
    # status = 'X', status <> 'X', status IN ('X', 'Y'), p_status NOT IN (...)
    compared = set()
    for m in re.finditer(r"status\s*(?:=|<>|!=)\s*'([^']*)'"
                         r"|status\s+(?:NOT\s+)?IN\s*\(\s*('[^']*'(?:\s*,\s*'[^']*')*)\s*\)",
                         bodies, re.IGNORECASE):
        compared |= {m.group(1)} if m.group(1) is not None else set(
            re.findall(r"'([^']*)'", m.group(2)))
    assert compared and compared <= statuses, f"not a C status: {sorted(compared - statuses)}"
    fired = set(re.findall(r"ty_job_(?:transition|request|fail)\s*\([^,]+,\s*'([^']*)'", bodies))
    assert fired and fired <= set(c["job_events"]), \
        f"not a C event: {sorted(fired - set(c['job_events']))}"
