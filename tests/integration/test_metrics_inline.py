"""A report's numbers stored inline in its `reports` row (migration 0022): resends stay
idempotent, and a database holding the old per-number `metrics` rows is migrated so that the API
serves the same points, superseded attempts' points still queryable and marked."""
import glob
import hashlib
import json
import os

import pytest

import harness
from test_metrics import SERVER_ARGS, FakeAgent, db_name, metrics, running_job, ts
from test_prometheus import scrape, value


@pytest.fixture
def srv(server_factory):
    return server_factory(extra_args=SERVER_ARGS)


def test_resent_report_with_other_numbers_is_ignored_and_counted_once(srv, pg):
    node = FakeAgent(srv)
    try:
        job = running_job(srv, node, num_workers=1)
        before, _ = scrape(srv)
        node.report(job, 0, 1, {"loss": 0.5, "acc": 0.1}, step=1)
        # Same key (job, attempt, rank, k), other numbers: the first delivery stands.
        node.report(job, 0, 1, {"loss": 9.5, "extra": 3.0}, step=7)
        after, _ = scrape(srv)
    finally:
        node.close()
    points = metrics(srv, job)
    assert [(p["name"], p["value"], p["step"]) for p in points] == \
        [("acc", 0.1, 1), ("loss", 0.5, 1)]
    db = db_name(srv)
    assert json.loads(pg.psql(f"SELECT metrics FROM reports WHERE job_id = {job}", db=db)) == \
        {"acc": 0.1, "loss": 0.5}
    assert pg.psql(f"SELECT count(*) FROM metrics WHERE job_id = {job}", db=db) == "2"
    assert value(after, "trainyard_reports_ingested_total") - \
        value(before, "trainyard_reports_ingested_total") == 1
    assert value(after, "trainyard_metric_points_ingested_total") - \
        value(before, "trainyard_metric_points_ingested_total") == 2
    assert srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"] == \
        {"loss": 0.5, "acc": 0.1, "step": 1}


def apply_migrations_before(pg, db, version):
    """Applies migrations/NNNN_*.sql below `version` with psql, recording them in
    schema_migrations with their sha256 as server/store/db_migrate.c does, so that a server
    started afterwards applies only the rest (and then its definitions)."""
    pg.psql("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now(), sha256 text)", db=db)
    for path in sorted(glob.glob(os.path.join(harness.SOURCE_DIR, "migrations", "*.sql"))):
        name = os.path.basename(path)
        if int(name.split("_")[0]) >= version:
            continue
        with open(path, "rb") as f:
            text = f.read()
        # One statement string: applied in one transaction with its schema_migrations row.
        pg.psql(text.decode() + f"\n;INSERT INTO schema_migrations (version, name, sha256) "
                f"VALUES ({int(name.split('_')[0])}, '{name}', "
                f"'{hashlib.sha256(text).hexdigest()}')", db=db)


def test_migration_0022_moves_per_number_rows_into_their_reports(pg, server_factory, database):
    db = database.split("dbname=")[1].split()[0]
    apply_migrations_before(pg, db, 22)
    # A job of two attempts as the old schema held it: attempt 1's reports (two ranks) with one
    # metrics row per number, and attempt 2's numbers written by SQL without a report row.
    job = pg.psql("INSERT INTO jobs (name, owner, status, spec, attempt) "
                  "VALUES ('old', 'admin', 'FAILED', '{\"entrypoint\": [\"true\"]}', 2) "
                  "RETURNING id", db=db).splitlines()[0]
    pg.psql("INSERT INTO nodes (id, hostname, address, status, resources) "
            "VALUES ('old-node', 'old-node', '127.0.0.1', 'LOST', '{}')", db=db)
    rows = []
    for rank in (0, 1):
        for k in (1, 2, 3):
            pg.psql(f"INSERT INTO reports (job_id, attempt, rank, seq, step, node_id, reported_at) "
                    f"VALUES ({job}, 1, {rank}, {k}, {10 * k}, 'old-node', "
                    f"'{ts(1000 * k + rank)}')", db=db)
            rows.append((1, rank, k, "loss", 10 * k, 1.0 / k + rank, ts(1000 * k + rank)))
            rows.append((1, rank, k, "acc", 10 * k, k / 10.0, ts(1000 * k + rank)))
    rows.append((2, 0, 1, "loss", 5, 0.25, ts(9000)))
    pg.psql("INSERT INTO metrics (job_id, attempt, rank, seq, name, step, value, reported_at) "
            "VALUES " + ", ".join(f"({job}, {a}, {r}, {k}, '{n}', {s}, {v!r}, '{t}')"
                                  for a, r, k, n, s, v, t in rows), db=db)
    report_rows = pg.psql("SELECT count(*) FROM reports", db=db)

    srv = server_factory(extra_args=SERVER_ARGS)
    assert int(pg.psql("SELECT max(version) FROM schema_migrations", db=db)) >= 22
    assert pg.psql("SELECT relkind FROM pg_class WHERE relname = 'metrics'", db=db) == "v"
    assert pg.psql("SELECT count(*) FROM metrics", db=db) == str(len(rows))
    assert pg.psql("SELECT count(*) FROM reports", db=db) == str(int(report_rows) + 1)
    assert pg.psql(f"SELECT metrics, node_id IS NULL FROM reports WHERE job_id = {job} "
                   "AND attempt = 1 AND rank = 1 AND seq = 2", db=db) == \
        '{"acc": 0.2, "loss": 1.5}|f'
    assert pg.psql(f"SELECT step, metrics, node_id IS NULL FROM reports WHERE job_id = {job} "
                   "AND attempt = 2", db=db) == '5|{"loss": 0.25}|t'

    points = metrics(srv, job)
    expect = sorted(rows, key=lambda x: (x[3], x[1], x[6], x[0], x[2]))
    assert [(p["attempt"], p["rank"], p["name"], p["step"], p["value"], p["time"][:23])
            for p in points] == [(a, r, n, s, v, t[:23]) for a, r, k, n, s, v, t in expect]
    assert [p.get("superseded", False) for p in points] == [a == 1 for a, *_ in expect]
    old = metrics(srv, job, "?attempt=1&name=loss&rank=1")
    assert [(p["value"], p["superseded"]) for p in old] == [(2.0, True), (1.5, True),
                                                            (1.0 + 1 / 3, True)]
    band = metrics(srv, job, "?mode=band&max_points=1&name=loss&rank=0")
    assert [(b["count"], b["first"], b["last"], b["min"], b["max"], b["attempt"])
            for b in band] == [(4, 1.0, 0.25, 0.25, 1.0, 2)]
    assert "superseded" not in band[0]
    assert json.loads(pg.psql("SELECT jsonb_agg(DISTINCT attempt) FROM metrics", db=db)) == [1, 2]
    assert srv.request("DELETE", f"/api/v1/jobs/{job}").status in (200, 204)
    assert pg.psql("SELECT count(*) FROM metrics", db=db) == "0"
