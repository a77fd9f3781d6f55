"""Migrations and definitions (README.md, "Database schema and definitions"): a database made by
an older server upgrades without loss and its jobs go on; an applied migration whose text changed
stops the server with one line naming it."""
import hashlib
import os
import re
import subprocess

import harness

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "db_eabbf4a.sql")
MIGRATIONS = os.path.join(harness.SOURCE_DIR, "migrations")
SERVER_ARGS = ["--heartbeat-timeout-s", "2"]


def db_name(url):
    return url.split("dbname=")[1].split()[0]


def restore(pg, db, path):
    subprocess.run(["psql", "-h", pg.sockdir, "-U", "trainyard", "-d", db, "-XAtq",
                    "-v", "ON_ERROR_STOP=1", "-f", path], check=True, stdout=subprocess.DEVNULL)


def rows(pg, db, sql):
    out = pg.psql(sql, db=db)
    return out.splitlines() if out else []


def migration_files():
    return sorted(f for f in os.listdir(MIGRATIONS) if f.endswith(".sql"))


def sha256_of(name):
    with open(os.path.join(MIGRATIONS, name), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# Every public function, trigger and view with its definition and comment: what the definitions
# of server/store/sql/ make. Compared between an upgraded database and a fresh one.
DEFINITIONS = """
SELECT 'function ' || p.oid::regprocedure || E'\n' || pg_get_functiondef(p.oid) || E'\n'
       || coalesce(obj_description(p.oid, 'pg_proc'), '')
  FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger ' || t.tgname || E'\n' || pg_get_triggerdef(t.oid)
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
 WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'view ' || c.relname || E'\n' || pg_get_viewdef(c.oid) || E'\n'
       || coalesce(obj_description(c.oid, 'pg_class'), '')
  FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'v'
UNION ALL
SELECT 'default ' || c.relname || '.' || a.attname || ' ' || pg_get_expr(d.adbin, d.adrelid)
  FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid
  JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
 WHERE c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT 'transition ' || coalesce(from_status, '-') || ' ' || event || ' '
       || coalesce(to_status, '-') FROM job_transitions
UNION ALL
SELECT 'status ' || name || ' ' || terminal || ' ' || description FROM job_statuses
ORDER BY 1
"""


def definitions(pg, db):
    return pg.psql(DEFINITIONS, db=db)


def test_a_database_made_by_eabbf4a_upgrades_without_loss_and_its_jobs_go_on(
        pg, database, server_factory, agent_factory):
    db = db_name(database)
    restore(pg, db, FIXTURE)
    jobs = dict(r.split("|", 1) for r in rows(pg, db, "SELECT name, id || '|' || status FROM jobs"))
    assert {n: s.split("|")[1] for n, s in jobs.items()} == {
        "metrics-ckpt": "SUCCEEDED", "fails": "FAILED", "stopped": "STOPPED",
        "running": "RUNNING", "restarting": "RESTARTING", "pending": "PENDING"}
    ids = {n: int(s.split("|")[0]) for n, s in jobs.items()}
    kept = {
        "attempts": "SELECT job_id, attempt, status, master_port FROM attempts",
        "workers": "SELECT job_id, attempt, rank, node_id, pid, exit_code, signal FROM workers",
        "metrics": "SELECT job_id, attempt, rank, seq, name, value FROM metrics",
        "reports": "SELECT job_id, attempt, rank, seq, checkpoint_dir FROM reports",
        "checkpoints": "SELECT id, job_id, attempt, idx, step, status, location FROM checkpoints",
        "events": "SELECT id, job_id, status, message FROM job_events",
        "stream": "SELECT job_id, seq, kind FROM job_stream",
    }
    before = {k: set(rows(pg, db, q)) for k, q in kept.items()}
    assert before["metrics"] and before["checkpoints"] and before["workers"]
    applied = rows(pg, db, "SELECT name FROM schema_migrations ORDER BY version")
    assert pg.psql("SELECT count(*) FROM information_schema.columns "
                   "WHERE table_name = 'schema_migrations' AND column_name = 'sha256'",
                   db=db) == "0"
    assert pg.psql("SELECT count(*) FROM pg_proc WHERE proname = 'ty_job_json_without_restarts'",
                   db=db) == "1"
    # The fixture's admin token is unknown here: one more, so that the test may use the API.
    token = "ty_upgrade_test_admin_token"
    pg.psql("INSERT INTO api_tokens (name, role, token_hash) VALUES ('upgrade-admin', 'admin', "
            f"'{hashlib.sha256(token.encode()).hexdigest()}')", db=db)

    srv = server_factory(extra_args=SERVER_ARGS)
    srv.admin_token = token
    log = srv.log_text()
    assert "this database predates migration checksums" in log, log
    assert f"recorded the sha256 of the {len(applied)} migrations it had applied" in log, log
    assert "applied migration 0029_drop_superseded_definitions.sql" in log, log

    # Every row is still there, and every applied migration now carries its file's checksum.
    for k, q in kept.items():
        assert before[k] <= set(rows(pg, db, q)), k
    assert rows(pg, db, "SELECT name || ' ' || coalesce(sha256, 'NULL') FROM schema_migrations "
                        "ORDER BY version") == [f"{n} {sha256_of(n)}" for n in migration_files()]
    assert pg.psql("SELECT count(*) FROM pg_proc WHERE proname = 'ty_job_json_without_restarts'",
                   db=db) == "0"
    done = srv.request("GET", f"/api/v1/jobs/{ids['metrics-ckpt']}").json
    assert done["status"] == "SUCCEEDED" and done["failures"] == 0, done
    assert done["result"]["latest_checkpoint"]["step"] == 30, done
    cks = srv.request("GET", f"/api/v1/jobs/{ids['metrics-ckpt']}/checkpoints").json["checkpoints"]
    assert len(cks) == 3, cks
    assert srv.request("GET", f"/api/v1/jobs/{ids['fails']}").json["status"] == "FAILED"
    assert srv.request("GET", f"/api/v1/jobs/{ids['stopped']}").json["status"] == "STOPPED"

    # The old nodes send no heartbeat: they are lost, the running job restarts (a failure left),
    # and a new node takes the restarting, restarted and pending jobs to their end.
    srv.wait_job(ids["running"], {"RESTARTING"}, timeout=60)
    agent_factory(srv, cpus=4)
    for name in ("running", "restarting", "pending"):
        job = srv.wait_job(ids[name], {"SUCCEEDED", "FAILED", "STOPPED"}, timeout=120)
        assert job["status"] == "SUCCEEDED", (name, job)
    running = srv.request("GET", f"/api/v1/jobs/{ids['running']}").json
    assert running["attempt"] == 2 and running["failures"] == 1, running
    restarted = srv.request("GET", f"/api/v1/jobs/{ids['restarting']}").json
    assert restarted["attempt"] == 2 and restarted["preemptions"] == 1, restarted

    # The definitions are the current ones: the same as a database this server made fresh.
    fresh = pg.create_database()
    try:
        other = harness.Server(database_url=pg.url(fresh)).start()
        assert other.stop() == 0, other.log_text()
        assert definitions(pg, db) == definitions(pg, fresh)
    finally:
        pg.drop_database(fresh)


def test_an_applied_migration_that_changed_stops_the_server(pg, database, server_factory):
    db = db_name(database)
    first = harness.Server(database_url=database).start()
    assert first.stop() == 0, first.log_text()
    name = "0014_restarts.sql"
    pg.psql(f"UPDATE schema_migrations SET sha256 = repeat('0', 64) WHERE name = '{name}'", db=db)
    before = definitions(pg, db)
    pg.psql("CREATE OR REPLACE FUNCTION ty_preemptions_max() RETURNS integer LANGUAGE sql "
            "IMMUTABLE AS 'SELECT 11'", db=db)

    s = harness.Server(database_url=database)
    s.start(wait=False)
    assert s.proc.wait(timeout=60) != 0
    with open(s.log_path) as f:
        lines = [ln for ln in f if "0014_restarts.sql" in ln]
    assert len(lines) == 1, lines
    assert (f"migration {name} was changed after it was applied to this database (sha256 "
            + "0" * 64) in lines[0], lines
    assert f"the file now has sha256 {sha256_of(name)}" in lines[0], lines
    # Nothing was applied: the function changed by hand keeps its body until the file is back.
    assert pg.psql("SELECT ty_preemptions_max()", db=db) == "11"

    pg.psql(f"UPDATE schema_migrations SET sha256 = '{sha256_of(name)}' WHERE name = '{name}'",
            db=db)
    srv = server_factory()
    assert srv.request("GET", "/api/v1/health", token=None).status == 200
    assert pg.psql("SELECT ty_preemptions_max()", db=db) == "10"
    assert definitions(pg, db) == before


def sql_without_comments(path):
    with open(path) as f:
        return "\n".join(line.split("--")[0] for line in f)


def test_migrations_hold_no_definitions_and_each_definition_is_one_file_named_after_it():
    created = re.compile(r"\bCREATE\s+(?:OR\s+REPLACE\s+)?(FUNCTION|PROCEDURE|TRIGGER|VIEW)\s+(\w+)",
                         re.I)
    for name in migration_files():
        found = created.findall(sql_without_comments(os.path.join(MIGRATIONS, name)))
        assert not found, f"{name} defines {found}: definitions go in server/store/sql/"
    sql_dir = os.path.join(harness.SOURCE_DIR, "server", "store", "sql")
    files = sorted(f for f in os.listdir(sql_dir) if f.endswith(".sql"))
    with open(os.path.join(sql_dir, "load_order.txt")) as f:
        order = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    assert sorted(order) == files
    where = {}
    for name in files:
        stem = name[:-4]
        found = created.findall(sql_without_comments(os.path.join(sql_dir, name)))
        if stem in ("job_statuses", "job_transitions"):
            assert not found, name
            continue
        kinds = {k.upper() for k, _ in found}
        names = {n for k, n in found if k.upper() != "TRIGGER"}
        assert names == {stem}, f"{name} defines {sorted(names)}"
        assert kinds <= {"FUNCTION", "VIEW", "TRIGGER"}, name
        where.setdefault(stem, []).append(name)
    assert all(len(v) == 1 for v in where.values()), where
