"""REST API against a real server and PostgreSQL: jobs, validation, errors, auth roles, paging."""
import json
import re
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import harness

SPEC = {"name": "mnist", "entrypoint": ["python3", "train.py"],
        "scaling_config": {"num_workers": 2}}


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs and tokens. Enough
    HTTP threads for the concurrent submissions below (a request waiting for its batch holds its
    thread)."""
    return module_server_factory(extra_args=["--http-threads", "24"])


def test_health_needs_no_token(server):
    r = server.request("GET", "/api/v1/health", token=None)
    assert r.status == 200
    assert r.json == {"status": "ok", "database": "ok", "role": "leader", "auth": "token"}


def test_version_reports_server_version(server):
    r = server.request("GET", "/api/v1/version")
    assert r.status == 200
    assert r.json["api"] == "v1" and r.json["version"]


def test_submit_returns_committed_job_with_location(server, pg):
    r = server.request("POST", "/api/v1/jobs", SPEC)
    assert r.status == 201
    job = r.json
    assert job["status"] == "PENDING" and job["name"] == "mnist" and job["owner"] == "admin"
    assert r.headers["Location"] == f"/api/v1/jobs/{job['id']}"
    # Committed: visible to a separate database session right away.
    db = server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]
    assert pg.psql(f"SELECT status FROM jobs WHERE id = {job['id']}", db=db) == "PENDING"
    assert pg.psql(f"SELECT status FROM job_events WHERE job_id = {job['id']}", db=db) == "PENDING"


def test_concurrent_submissions_each_get_their_own_committed_job(server, pg):
    """Submissions arriving together are committed together (server/api/submit_queue.c): each
    request still gets the job it sent, committed, with its event and both stream rows."""
    names = [f"together-{i}" for i in range(24)]
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        replies = list(pool.map(lambda n: server.request("POST", "/api/v1/jobs",
                                                         dict(SPEC, name=n)), names))
    assert [r.status for r in replies] == [201] * len(names)
    assert [r.json["name"] for r in replies] == names
    ids = [r.json["id"] for r in replies]
    assert len(set(ids)) == len(ids)
    assert [r.headers["Location"] for r in replies] == [f"/api/v1/jobs/{i}" for i in ids]
    db = server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]
    id_list = ",".join(map(str, ids))
    rows = pg.psql(
        "SELECT j.name, j.stream_seq, "
        "       (SELECT count(*) FROM job_events e WHERE e.job_id = j.id), "
        "       (SELECT count(*) FROM job_stream s WHERE s.job_id = j.id AND s.seq = 1), "
        "       (SELECT count(*) FROM cluster_stream c WHERE c.job_id = j.id) "
        f"FROM jobs j WHERE j.id IN ({id_list})", db=db)
    assert sorted(rows.splitlines()) == sorted(f"{n}|1|1|1|1" for n in names)


def test_failing_submissions_fail_alone(server, pg):
    """A job whose insert fails takes no other job of its batch down: the batch is retried job by
    job. The failures come from a trigger of this test's, raising for three of the names. The jobs
    table is locked while the submissions arrive: the first few become the committers
    (submit_queue.c's SUBMIT_COMMITTERS) and wait for the lock, the others queue up behind them
    and are committed in batches once it is released. (A request can also wait on an HTTP thread
    busy with another, so the test releases the lock once six of them are queued.)"""
    db = server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]
    pg.psql("CREATE FUNCTION test_poison() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'poisoned'; END $$; "
            "CREATE TRIGGER poison BEFORE INSERT ON jobs FOR EACH ROW "
            "WHEN (NEW.name LIKE 'poison-%') EXECUTE FUNCTION test_poison()", db=db)
    names = [f"poison-{i}" if i in (5, 9, 13) else f"beside-{i}" for i in range(16)]

    def queued():
        try:  # an HTTP thread waiting for a batch can hold this connection too: then ask again
            text = server.request("GET", "/metrics", timeout=5).text
        except OSError:
            return 0
        return int(float(re.search(r"^trainyard_submissions_queued (\S+)$", text, re.M)[1]))

    deadline = time.time() + 60
    with ThreadPoolExecutor(max_workers=len(names) + 1) as pool:
        # Held until cancelled below: the sleep only keeps the lock.
        holder = pool.submit(pg.psql, "BEGIN; LOCK TABLE jobs IN SHARE MODE; "
                             "SELECT pg_sleep(120) AS holding_jobs; COMMIT", db=db)
        try:
            while int(pg.psql("SELECT count(*) FROM pg_locks WHERE relation = 'jobs'::regclass "
                              "AND mode = 'ShareLock' AND granted", db=db)) < 1:
                assert time.time() < deadline
            futures = [pool.submit(server.request, "POST", "/api/v1/jobs", dict(SPEC, name=n))
                       for n in names]
            while queued() < 6:
                assert time.time() < deadline
        finally:
            pg.psql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                    "WHERE query LIKE '%AS holding_jobs%' AND pid <> pg_backend_pid()", db=db)
            with pytest.raises(subprocess.CalledProcessError):
                holder.result()
        replies = [f.result() for f in futures]
    pg.psql("DROP TRIGGER poison ON jobs; DROP FUNCTION test_poison()", db=db)
    assert [r.status for r in replies] == [500 if n.startswith("poison") else 201 for n in names]
    assert all(r.headers["Content-Type"] == "application/problem+json"
               for r in replies if r.status == 500)
    assert [r.json["name"] for r in replies if r.status == 201] == [
        n for n in names if n.startswith("beside")]
    assert pg.psql("SELECT count(*) FROM jobs WHERE name LIKE 'poison-%'", db=db) == "0"


def test_submitted_spec_is_normalized_with_defaults(server):
    job = server.submit({"entrypoint": "python3 train.py"})
    spec = job["spec"]
    assert spec["backend"] == "torch"
    assert spec["scaling_config"]["placement_strategy"] == "PACK"
    assert spec["scaling_config"]["resources_per_worker"] == {"CPU": 1}
    assert spec["run_config"]["failure_config"]["max_failures"] == 0


def test_get_job_round_trips(server):
    job = server.submit(SPEC)
    r = server.request("GET", f"/api/v1/jobs/{job['id']}")
    assert r.status == 200
    assert r.json["id"] == job["id"] and r.json["spec"] == job["spec"]
    assert set(r.json["result"]) == {"metrics", "latest_checkpoint", "best_checkpoint", "error"}


def test_unknown_job_is_404_problem(server):
    r = server.request("GET", "/api/v1/jobs/999999")
    assert r.status == 404
    assert r.headers["Content-Type"] == "application/problem+json"
    assert r.json["code"] == "job-not-found" and "999999" in r.json["detail"]
    assert server.request("GET", "/api/v1/jobs/abc").status == 404


def test_invalid_spec_names_every_bad_field(server):
    bad = {"entrypoint": [], "scaling_config": {"num_workers": 0, "placement_strategy": "X",
                                                "resources_per_worker": {"GPU": -1}},
           "bogus": 1}
    r = server.request("POST", "/api/v1/jobs", bad)
    assert r.status == 400
    assert r.headers["Content-Type"] == "application/problem+json"
    fields = {e["field"] for e in r.json["errors"]}
    assert {"entrypoint", "scaling_config.num_workers", "scaling_config.placement_strategy",
            "scaling_config.resources_per_worker.GPU", "bogus"} <= fields


def test_missing_entrypoint_rejected(server):
    r = server.request("POST", "/api/v1/jobs", {"name": "x"})
    assert r.status == 400
    assert [e["field"] for e in r.json["errors"]] == ["entrypoint"]


def test_min_greater_than_max_rejected(server):
    r = server.request("POST", "/api/v1/jobs",
                       {"entrypoint": "x", "scaling_config": {"num_workers": {"min": 4, "max": 2}}})
    assert r.status == 400
    assert any(e["field"].startswith("scaling_config.num_workers") for e in r.json["errors"])


def test_oversized_name_rejected(server):
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "x", "name": "n" * 500})
    assert r.status == 400
    assert r.json["errors"][0]["field"] == "name"


def test_malformed_json_is_400_with_position(server):
    r = server.request("POST", "/api/v1/jobs", '{"entrypoint": ',
                       headers={"Content-Type": "application/json"})
    assert r.status == 400
    assert r.json["code"] == "invalid-json" and "line 1" in r.json["detail"]


def test_wrong_content_type_is_415(server):
    r = server.request("POST", "/api/v1/jobs", json.dumps(SPEC),
                       headers={"Content-Type": "text/plain"})
    assert r.status == 415
    assert "application/json" in r.json["detail"]


def test_body_over_cap_is_413(server):
    huge = json.dumps({"entrypoint": "x", "train_loop_config": {"blob": "a" * (2 << 20)}})
    r = server.request("POST", "/api/v1/jobs", huge, headers={"Content-Type": "application/json"})
    assert r.status == 413
    assert r.json["code"] == "body-too-large"


def test_unknown_route_is_404_and_wrong_method_405(server):
    r = server.request("GET", "/api/v1/nope")
    assert r.status == 404 and r.json["code"] == "not-found"
    r = server.request("PUT", "/api/v1/jobs", SPEC)
    assert r.status == 405
    assert set(r.headers["Allow"].split(", ")) == {"GET", "POST"}


def test_list_is_newest_first_with_cursor_paging(server):
    ids = [server.submit(dict(SPEC, name=f"j{i}"))["id"] for i in range(7)]
    seen, cursor = [], None
    while True:
        q = "/api/v1/jobs?limit=3" + (f"&cursor={cursor}" if cursor else "")
        r = server.request("GET", q)
        assert r.status == 200
        assert len(r.json["jobs"]) <= 3
        seen += [j["id"] for j in r.json["jobs"]]
        cursor = r.json["next_cursor"]
        if cursor is None:
            break
    # Every job once, newest first: these seven, then the earlier tests' jobs.
    assert seen[:7] == sorted(ids, reverse=True) and seen == sorted(set(seen), reverse=True)


def test_list_filters_by_status(server):
    a = server.submit(SPEC)["id"]
    b = server.submit(SPEC)["id"]
    assert server.request("POST", f"/api/v1/jobs/{a}/stop").status == 202
    stopped = server.request("GET", "/api/v1/jobs?status=STOPPED").json["jobs"]
    assert a in [j["id"] for j in stopped] and b not in [j["id"] for j in stopped]
    assert {j["status"] for j in stopped} == {"STOPPED"}
    both = server.request("GET", "/api/v1/jobs?status=STOPPED,PENDING").json["jobs"]
    assert {a, b} <= {j["id"] for j in both}
    assert {j["status"] for j in both} == {"STOPPED", "PENDING"}


def test_list_rejects_unknown_status_and_bad_limit(server):
    r = server.request("GET", "/api/v1/jobs?status=DANCING")
    assert r.status == 400 and r.json["errors"][0]["field"] == "status"
    r = server.request("GET", "/api/v1/jobs?limit=0")
    assert r.status == 400 and r.json["errors"][0]["field"] == "limit"
    r = server.request("GET", "/api/v1/jobs?cursor=xyz")
    assert r.status == 400 and r.json["errors"][0]["field"] == "cursor"


def test_stop_pending_job_stops_it_and_records_event(server, pg):
    job = server.submit(SPEC)
    r = server.request("POST", f"/api/v1/jobs/{job['id']}/stop")
    assert r.status == 202
    assert r.json["status"] == "STOPPED" and r.json["finished_at"]
    r = server.request("POST", f"/api/v1/jobs/{job['id']}/stop")
    assert r.status == 409 and r.json["code"] == "job-finished"


def test_delete_only_finished_jobs(server):
    job = server.submit(SPEC)
    r = server.request("DELETE", f"/api/v1/jobs/{job['id']}")
    assert r.status == 409 and "PENDING" in r.json["detail"]
    server.request("POST", f"/api/v1/jobs/{job['id']}/stop")
    assert server.request("DELETE", f"/api/v1/jobs/{job['id']}").status == 204
    assert server.request("GET", f"/api/v1/jobs/{job['id']}").status == 404


def test_requests_without_token_are_401(server):
    r = server.request("GET", "/api/v1/jobs", token=None)
    assert r.status == 401
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert server.request("GET", "/api/v1/jobs", token="ty_wrong").status == 401


def test_viewer_reads_but_cannot_submit(server):
    viewer = server.create_token("vera", "viewer")
    assert server.request("GET", "/api/v1/jobs", token=viewer).status == 200
    r = server.request("POST", "/api/v1/jobs", SPEC, token=viewer)
    assert r.status == 403 and "user" in r.json["detail"]


def test_user_stops_own_jobs_only(server):
    alice = server.create_token("alice", "user")
    bob = server.create_token("bob", "user")
    job = server.submit(SPEC, token=alice)
    assert job["owner"] == "alice"
    r = server.request("POST", f"/api/v1/jobs/{job['id']}/stop", token=bob)
    assert r.status == 403 and "belongs to another user" in r.json["detail"], r.json
    assert "'bob' may stop only its own jobs" in r.json["detail"]
    assert server.request("GET", f"/api/v1/jobs/{job['id']}").json["status"] == "PENDING"
    # Ownership is decided before the job's status: 403, not 409 for an unfinished job.
    r = server.request("DELETE", f"/api/v1/jobs/{job['id']}", token=bob)
    assert r.status == 403 and "'bob' may delete only its own jobs" in r.json["detail"], r.json
    assert server.request("POST", f"/api/v1/jobs/{job['id']}/stop", token=alice).status == 202
    assert server.request("DELETE", f"/api/v1/jobs/{job['id']}", token=bob).status == 403
    assert server.request("GET", f"/api/v1/jobs/{job['id']}").json["status"] == "STOPPED"
    assert server.request("DELETE", f"/api/v1/jobs/{job['id']}", token=alice).status == 204


def test_admin_stops_anyones_job(server):
    alice = server.create_token("alice2", "user")
    job = server.submit(SPEC, token=alice)
    assert server.request("POST", f"/api/v1/jobs/{job['id']}/stop").status == 202


def test_only_admin_manages_tokens(server):
    user = server.create_token("alice3", "user")
    assert server.request("GET", "/api/v1/tokens", token=user).status == 403
    assert server.request("POST", "/api/v1/tokens", {"name": "x", "role": "admin"},
                          token=user).status == 403


def test_revoked_token_stops_working(server):
    r = server.request("POST", "/api/v1/tokens", {"name": "tmp", "role": "viewer"})
    tok, tid = r.json["token"], r.json["id"]
    assert server.request("GET", "/api/v1/jobs", token=tok).status == 200
    listed = server.request("GET", "/api/v1/tokens").json["tokens"]
    assert "token" not in listed[0] and any(t["id"] == tid for t in listed)
    assert server.request("DELETE", f"/api/v1/tokens/{tid}").status == 204
    assert server.request("GET", "/api/v1/jobs", token=tok).status == 401
    assert server.request("DELETE", f"/api/v1/tokens/{tid}").status == 404


def test_token_request_validated(server):
    r = server.request("POST", "/api/v1/tokens", {"name": "", "role": "king", "x": 1})
    assert r.status == 400
    assert {e["field"] for e in r.json["errors"]} == {"name", "role", "x"}


def test_tokens_stored_hashed(server, pg):
    tok = server.create_token("alice4", "user")
    db = server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]
    stored = pg.psql("SELECT token_hash FROM api_tokens WHERE name = 'alice4'", db=db)
    assert tok not in stored and len(stored) == 64


def test_auth_none_allows_everything(server_factory):
    s = server_factory(auth="none")
    job = s.submit(SPEC, token=None)
    assert job["owner"] == "local"


def test_garbage_request_does_not_crash_server(server):
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.sendall(b"\x00\x01GARBAGE /\r\n\r\n")
        s.settimeout(5)
        try:
            s.recv(100)
        except OSError:
            pass
    assert server.request("GET", "/api/v1/health", token=None).status == 200
