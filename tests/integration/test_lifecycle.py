"""The job state machine (server/store/sql/job_transitions.sql, docs/lifecycle.md): the table in
the docs is the table in the database, the statuses are the ones the C code knows, and the SQL
functions drive a job through the table and refuse what it lacks. The functions are called
directly through psql on a node that is LOST, so the server's control loop never schedules onto it
and no agent is needed."""
import json
import os
import re
import subprocess

import pytest

import harness

LIFECYCLE_MD = os.path.join(harness.SOURCE_DIR, "docs", "lifecycle.md")


def _db(server):
    return server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]


def _sql(pg, server, sql):
    return pg.psql(sql, db=_db(server))


def _sql_error(pg, server, sql):
    """Runs sql expecting it to fail; returns the error (SQLSTATE and message)."""
    with pytest.raises(subprocess.CalledProcessError) as e:
        pg.psql(sql, db=_db(server))
    return e.value.stderr


def _doc_transitions():
    """(from, event, to) of every implemented row of the Transitions table in docs/lifecycle.md;
    from None: no job yet; to None: the job is deleted."""
    rows = set()
    in_table = False
    with open(LIFECYCLE_MD) as f:
        for line in f:
            if line.startswith("| from | event | to |"):
                in_table = True
                continue
            if in_table and not line.startswith("|"):
                break
            if not in_table or line.startswith("|---") or "not yet implemented" in line:
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            froms = [None] if cells[0] == "—" else [s.strip() for s in cells[0].split(",")]
            event = cells[1].strip("`")
            to = None if cells[2] == "(deleted)" else cells[2]
            for f_ in froms:
                rows.add((f_, event, to))
    return rows


def _place(pg, server, job, ranks, node="lost-node"):
    workers = [{"rank": r, "local_rank": r, "node_rank": 0, "node_id": node, "gpus": [],
                "resources": {"CPU": 1}} for r in range(ranks)]
    return _sql(pg, server, f"SELECT o_attempt FROM ty_place({job}, '{json.dumps(workers)}', 1)")


def _add_lost_node(pg, server, node="lost-node"):
    _sql(pg, server, "INSERT INTO nodes (id, hostname, address, status, resources) "
                     f"VALUES ('{node}', '{node}', '127.0.0.1', 'LOST', '{{\"CPU\": 8}}')")


def _status(pg, server, job):
    return _sql(pg, server, f"SELECT status FROM jobs WHERE id = {job}")


def _events(pg, server, job):
    return _sql(pg, server, f"SELECT string_agg(status, ' ' ORDER BY id) FROM job_events "
                            f"WHERE job_id = {job}").split()


def test_transition_table_in_the_docs_is_the_table_in_the_database(server, pg):
    out = _sql(pg, server, "SELECT coalesce(from_status, '-'), event, coalesce(to_status, '-') "
                           "FROM job_transitions")
    db = {tuple(None if v == "-" else v for v in line.split("|")) for line in out.splitlines()}
    docs = _doc_transitions()
    assert len(db) >= 20
    assert docs == db, (f"only in docs: {sorted(docs - db, key=str)}; "
                        f"only in the database: {sorted(db - docs, key=str)}")


def test_database_statuses_are_the_ones_the_server_knows(server, pg):
    db = _sql(pg, server, "SELECT name FROM job_statuses").split()
    assert "RESTARTING" in db
    # The list filter's refusal names every status of common/job_status.h.
    r = server.request("GET", "/api/v1/jobs?status=bogus")
    assert r.status == 400
    listed = re.search(r"use (.*) \(comma separated\)", r.json["detail"]).group(1)
    assert sorted(re.split(r", | or ", listed)) == sorted(db)
    for name in db:
        assert server.request("GET", f"/api/v1/jobs?status={name.lower()}").status == 200
    terminal = _sql(pg, server, "SELECT name FROM job_statuses WHERE terminal ORDER BY name")
    assert terminal.split() == ["FAILED", "STOPPED", "SUCCEEDED"]


def test_a_status_outside_the_table_is_refused_by_the_database(server, pg):
    job = server.submit({"entrypoint": ["true"]})["id"]
    err = _sql_error(pg, server, f"UPDATE jobs SET status = 'DONE' WHERE id = {job}")
    assert "jobs_status_fkey" in err
    assert _status(pg, server, job) == "PENDING"


def test_illegal_transition_raises_and_changes_nothing(server, pg):
    job = server.submit({"entrypoint": ["true"]})["id"]
    for event in ("running", "succeeded", "stopped", "delete", "no_such_event"):
        err = _sql_error(pg, server, f"SELECT ty_job_transition({job}, '{event}', 'x')")
        assert "TY001" in err and "illegal job transition" in err, err
    err = _sql_error(pg, server, "SELECT ty_job_transition(999999, 'stop', 'x')")
    assert "TY001" in err
    assert _status(pg, server, job) == "PENDING"
    assert _events(pg, server, job) == ["PENDING"]


def test_failing_worker_drives_the_job_through_the_table(server, pg):
    _add_lost_node(pg, server)
    job = server.submit({"entrypoint": ["true"], "scaling_config": {"num_workers": 2}})["id"]
    assert _place(pg, server, job, 2) == "1"
    assert _status(pg, server, job) == "STARTING"
    assert _place(pg, server, job, 2) == ""  # placed already: `place` is not allowed
    _sql(pg, server, f"SELECT ty_worker_started({job}, 1, 0, 100)")
    assert _status(pg, server, job) == "STARTING"
    _sql(pg, server, f"SELECT ty_worker_started({job}, 1, 1, 101)")
    assert _status(pg, server, job) == "RUNNING"
    exited = f"SELECT ty_worker_exited({job}, 1, 1, 3, NULL, NULL)"
    assert _sql(pg, server, exited) == "STOPPING"
    assert _sql(pg, server, exited) == ""  # a duplicate: nothing recorded
    # The stop signal kills rank 0: ignored by STOPPING, the first failure's error stays.
    assert _sql(pg, server, f"SELECT ty_worker_exited({job}, 1, 0, NULL, 15, NULL)") == "FAILED"
    assert _events(pg, server, job) == ["PENDING", "STARTING", "RUNNING", "STOPPING", "FAILED"]
    row = _sql(pg, server, f"SELECT a.status, a.error, j.error, j.finished_at IS NOT NULL "
                           f"FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE j.id = {job}")
    assert row == ("FAILED|worker rank 1 exited with code 3|worker rank 1 exited with code 3|t")
    err = _sql_error(pg, server, f"SELECT ty_job_transition({job}, 'stop', 'x')")
    assert "TY001" in err
    assert server.request("POST", f"/api/v1/jobs/{job}/stop").status == 409
    assert server.request("DELETE", f"/api/v1/jobs/{job}").status == 204
    assert _sql(pg, server, f"SELECT count(*) FROM job_events WHERE job_id = {job}") == "0"


def test_workers_exiting_zero_succeed_the_job(server, pg):
    _add_lost_node(pg, server)
    job = server.submit({"entrypoint": ["true"], "scaling_config": {"num_workers": 2}})["id"]
    _place(pg, server, job, 2)
    _sql(pg, server, f"SELECT ty_worker_started({job}, 1, 0, 100), "
                     f"ty_worker_started({job}, 1, 1, 101)")
    assert _sql(pg, server, f"SELECT ty_worker_exited({job}, 1, 0, 0, NULL, NULL)") == "RUNNING"
    assert _sql(pg, server, f"SELECT ty_worker_exited({job}, 1, 1, 0, NULL, NULL)") == "SUCCEEDED"
    assert _sql(pg, server, f"SELECT status FROM attempts WHERE job_id = {job}") == "SUCCEEDED"


def test_lost_node_fails_each_of_its_jobs_once(server, pg):
    _add_lost_node(pg, server)
    jobs = [server.submit({"entrypoint": ["true"], "scaling_config": {"num_workers": 2}})["id"]
            for _ in range(2)]
    for job in jobs:
        _place(pg, server, job, 2)
    # Two workers of each job on the node: each job is failed and settled once, not per worker.
    hit = _sql(pg, server, "SELECT * FROM ty_node_lost('lost-node')").split()
    assert sorted(hit) == sorted(str(j) for j in jobs)
    for job in jobs:
        assert _status(pg, server, job) == "FAILED"
        assert _events(pg, server, job) == ["PENDING", "STARTING", "STOPPING", "FAILED"]
        assert "lost-node was lost" in _sql(pg, server, f"SELECT error FROM jobs WHERE id = {job}")


def test_stop_requests_follow_the_table(server, pg):
    _add_lost_node(pg, server)
    pending = server.submit({"entrypoint": ["true"]})["id"]
    r = server.request("POST", f"/api/v1/jobs/{pending}/stop")
    assert r.status == 202 and r.json["status"] == "STOPPED"
    assert server.request("POST", f"/api/v1/jobs/{pending}/stop").status == 409
    running = server.submit({"entrypoint": ["true"]})["id"]
    _place(pg, server, running, 1)
    r = server.request("POST", f"/api/v1/jobs/{running}/stop")
    assert r.status == 202 and r.json["status"] == "STOPPING"
    # A second stop of a stopping job is accepted and records nothing.
    assert server.request("POST", f"/api/v1/jobs/{running}/stop").status == 202
    assert _events(pg, server, running) == ["PENDING", "STARTING", "STOPPING"]
    assert server.request("DELETE", f"/api/v1/jobs/{running}").status == 409
    assert _sql(pg, server, f"SELECT ty_worker_exited({running}, 1, 0, NULL, 15, NULL)") \
        == "STOPPED"
    assert _sql(pg, server, f"SELECT status FROM attempts WHERE job_id = {running}") == "STOPPED"


def test_timeout_fails_only_running_jobs_past_their_limit(server, pg):
    _add_lost_node(pg, server)
    late = server.submit({"entrypoint": ["true"], "timeout_s": 60})["id"]
    fresh = server.submit({"entrypoint": ["true"], "timeout_s": 60})["id"]
    stopping = server.submit({"entrypoint": ["true"], "timeout_s": 60})["id"]
    for job in (late, fresh, stopping):
        _place(pg, server, job, 1)
    assert server.request("POST", f"/api/v1/jobs/{stopping}/stop").status == 202
    _sql(pg, server, "UPDATE attempts SET created_at = now() - interval '2 minutes' "
                     f"WHERE job_id IN ({late}, {stopping})")
    # The server's control loop runs the same function every tick: it may get there first.
    assert _sql(pg, server, "SELECT ty_jobs_timed_out()") in ("0", "1")
    assert _status(pg, server, late) == "STOPPING"
    assert _sql(pg, server, "SELECT ty_jobs_timed_out()") == "0"
    assert "timed out after 60 s" in _sql(pg, server, f"SELECT error FROM jobs WHERE id = {late}")
    assert _status(pg, server, fresh) == "STARTING"
    assert _sql(pg, server, f"SELECT error IS NULL FROM jobs WHERE id = {stopping}") == "t"
