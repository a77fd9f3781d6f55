"""Issue 22, the server's part of keeping tenants apart, each tried as a hostile user would with a
real server, agents and workers:
  * finding 6: a code package is used (code_package, resume_from_package) only by a user who
    uploaded its bytes, or an admin: bob's private package is not alice's to run;
  * finding 11: a per-user artifact quota (code packages, checkpoint parts of one's jobs) refuses
    uploads past it with 403 artifact-quota-exceeded, leaves other users alone, and abandoned
    staged uploads are removed after --upload-stale-s;
  * finding 12: a job's reports past --max-report-bytes-per-job are refused with a job event
    saying why, and the server stays healthy;
  * finding 16: query parameters and path segments that are not UTF-8 text are a 400 naming
    them (not a 500 from PostgreSQL); completing a part never staged is a 409 naming the part
    (not a 507).
"""
import hashlib
import os
import textwrap
import time

import harness

PY = "/usr/bin/python3"


wait_for = harness.wait_for


def put_chunk(srv, sha, data, offset=0, token="admin"):
    return srv.request("PUT", f"/api/v1/code/{sha}?offset={offset}", body=data, token=token,
                       headers={"X-Content-SHA256": hashlib.sha256(data).hexdigest(),
                                "Content-Type": "application/octet-stream"})


def upload(srv, data, token="admin"):
    """PUTs data as one chunk and completes it: the last reply."""
    sha = hashlib.sha256(data).hexdigest()
    r = put_chunk(srv, sha, data, token=token)
    if r.status != 200:
        return sha, r
    return sha, srv.request("POST", f"/api/v1/code/{sha}/complete", body={}, token=token)


def events(srv, job):
    return [e["message"] or "" for e in
            srv.request("GET", f"/api/v1/jobs/{job}/events").json["events"]]


def healthy(srv):
    r = srv.request("GET", "/api/v1/health")
    assert r.status == 200, r
    r = srv.request("GET", "/api/v1/jobs")
    assert r.status == 200, r


def node_credential(agent):
    with open(os.path.join(agent.data_dir, "node.credential")) as f:
        return f.read().strip()


# ---- finding 6: packages are used by their uploaders ---------------------------------------------

def test_a_user_cannot_run_another_users_package_as_code_package(server):
    srv = server
    alice = srv.create_token("alice", "user")
    bob = srv.create_token("bob", "user")
    secret = b"bob's private working directory, packed"
    sha, r = upload(srv, secret, token=bob)
    assert r.status == 200 and r.json["owned"] is True, r
    spec = {"name": "steal", "entrypoint": [PY, "train.py"], "code_package": sha}
    # Alice knows the hash (a log line, a shared notebook): she may not run bob's bytes, by either
    # field that names a package.
    r = srv.request("POST", "/api/v1/jobs", body=spec, token=alice)
    assert r.status == 403, r
    assert r.json["code"] == "package-forbidden", r.json
    assert r.json["errors"][0]["field"] == "code_package", r.json
    r = srv.request("POST", "/api/v1/jobs", token=alice,
                    body={"name": "steal2", "entrypoint": [PY, "x.py"],
                          "resume_from_package": sha})
    assert r.status == 403 and r.json["errors"][0]["field"] == "resume_from_package", r
    assert srv.request("GET", "/api/v1/jobs", token=alice).json["jobs"] == []
    # Bob runs his own; an admin may run any.
    assert srv.request("POST", "/api/v1/jobs", body=spec, token=bob).status == 201
    assert srv.request("POST", "/api/v1/jobs", body=spec).status == 201
    # Alice sees it as not hers, and owns it once she has sent the same bytes herself.
    r = srv.request("GET", f"/api/v1/code/{sha}", token=alice)
    assert r.status == 200 and r.json["owned"] is False, r
    sha2, r = upload(srv, secret, token=alice)
    assert sha2 == sha and r.status == 200 and r.json["owned"] is True, r
    assert srv.request("POST", "/api/v1/jobs", body=spec, token=alice).status == 201


# ---- finding 16: no 5xx for a client's bad bytes -------------------------------------------------

def test_query_parameters_and_path_segments_that_are_not_utf8_are_a_400_naming_them(server):
    srv = server
    for path, field in [("/api/v1/jobs?owner=%ff", "owner"),
                        ("/api/v1/jobs?owner=a%00b", "owner"),
                        ("/api/v1/jobs?status=RUNNING&name=%c0%af", "name"),
                        ("/api/v1/jobs?owner=%ed%a0%80", "owner")]:
        r = srv.request("GET", path)
        assert r.status == 400, (path, r)
        assert r.headers["Content-Type"] == "application/problem+json", r.headers
        assert r.json["code"] == "invalid-parameter", r.json
        assert r.json["errors"][0]["field"] == field, (path, r.json)
    for path in ("/api/v1/nodes/%ff%fe", "/api/v1/code/%ff"):
        r = srv.request("GET", path)
        assert r.status == 400 and r.json["errors"][0]["field"] == "path", (path, r)
    # Valid UTF-8 still goes through.
    r = srv.request("GET", "/api/v1/jobs?owner=%c3%a9l%c3%a8ve")
    assert r.status == 200 and r.json["jobs"] == [], r
    healthy(srv)


def test_completing_an_upload_never_staged_is_a_409_naming_it(server, agent_factory):
    srv = server
    agent = agent_factory(cpus=1)
    job = srv.submit({"name": "ran", "entrypoint": ["true"], "working_dir": "/tmp"})["id"]
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    # The node ran attempt 1, so it may upload its parts; it never sent a byte of part 7.
    r = srv.request("POST", f"/api/v1/agent/checkpoints/{job}/1/7/part/complete",
                    body={"sha256": "a" * 64, "file_count": 1}, token=node_credential(agent),
                    headers={"X-Trainyard-Node": agent.node_id})
    assert r.status == 409, r
    assert r.json["code"] == "upload-offset" and "part" in r.json["detail"], r.json
    assert "offset 0" in r.json["detail"], r.json
    user = srv.create_token("carol", "user")
    r = srv.request("POST", f"/api/v1/code/{'b' * 64}/complete", body={}, token=user)
    assert r.status == 409 and "package" in r.json["detail"], r
    healthy(srv)


# ---- finding 11: the artifact store does not fill ------------------------------------------------

CHECKPOINTER = textwrap.dedent("""
    import os, shutil, tempfile
    import trainyard
    d = tempfile.mkdtemp(prefix="ty-quota-")
    with open(os.path.join(d, "weights.bin"), "wb") as f:
        f.write(b"w" * 4096)
    trainyard.report({"loss": 1.0}, checkpoint=d)
    shutil.rmtree(d)
""")


def submit_checkpointer(srv, token, name, **extra):
    work = harness.make_tmpdir("ty-quota-")
    os.chmod(work, 0o755)
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(CHECKPOINTER)
    return srv.submit(dict({"name": name, "entrypoint": [PY, "train.py"], "working_dir": work},
                           **extra), token=token)["id"]


def artifact_state(srv, job):
    cks = srv.request("GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"]
    return cks[0]["artifact"]["state"] if cks and cks[0].get("artifact") else None


def test_a_users_artifact_quota_refuses_their_uploads_and_not_other_users(server_factory,
                                                                           agent_factory):
    srv = server_factory(extra_args=("--artifact-quota-bytes", "3000"))
    agent_factory(srv=srv, cpus=2)
    alice = srv.create_token("alice", "user")
    bob = srv.create_token("bob", "user")
    sha, r = upload(srv, b"a" * 2000, token=alice)
    assert r.status == 200, r
    # A second package would take alice past her 3000 bytes: refused before it is stored.
    sha, r = upload(srv, b"b" * 2000, token=alice)
    assert r.status == 403, r
    assert r.headers["Content-Type"] == "application/problem+json", r.headers
    assert r.json["code"] == "artifact-quota-exceeded", r.json
    assert "alice" in r.json["detail"] and "3000" in r.json["detail"], r.json
    assert srv.request("GET", f"/api/v1/code/{sha}", token=alice).json["state"] == "missing"
    # Bob has a quota of his own.
    _, r = upload(srv, b"b" * 2000, token=bob)
    assert r.status == 200, r
    # Alice fills her quota; her job's checkpoint is then refused by the store, with an event
    # naming the quota, while bob's job's checkpoint is stored.
    _, r = upload(srv, b"c" * 1000, token=alice)
    assert r.status == 200, r
    mine = submit_checkpointer(srv, alice, "alice-ckpt")
    theirs = submit_checkpointer(srv, bob, "bob-ckpt")
    for job in (mine, theirs):
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    wait_for(lambda: artifact_state(srv, theirs) == "complete", what="bob's checkpoint stored")
    found = wait_for(lambda: [m for m in events(srv, mine) if "artifact quota" in m],
                     what="quota event")
    assert "alice" in found[0] and "3000" in found[0], found
    assert artifact_state(srv, mine) != "complete"
    healthy(srv)


def test_an_admin_sets_a_users_own_artifact_quota(server_factory):
    srv = server_factory(extra_args=("--artifact-quota-bytes", "1000"))
    alice = srv.create_token("alice", "user")
    bob = srv.create_token("bob", "user")
    _, r = upload(srv, b"x" * 800, token=alice)
    assert r.status == 200, r
    _, r = upload(srv, b"y" * 800, token=alice)
    assert r.status == 403 and r.json["code"] == "artifact-quota-exceeded", r
    r = srv.request("GET", "/api/v1/quotas/users/alice", token=alice)
    assert r.status == 200, r
    assert r.json["artifact_bytes"] == {"limit": 1000, "used": 800, "default": True}, r.json
    # Only an admin sets it; a user reads only their own.
    body = {"artifact_bytes": 5000}
    assert srv.request("PUT", "/api/v1/quotas/users/alice", body=body, token=alice).status == 403
    assert srv.request("GET", "/api/v1/quotas/users/alice", token=bob).status == 403
    for bad, field in (({"artifact_bytes": -1}, "artifact_bytes"),
                       ({"artifact_bytes": "lots"}, "artifact_bytes"), ({"gpus": 1.5}, "gpus")):
        r = srv.request("PUT", "/api/v1/quotas/users/alice", body=bad)
        assert r.status == 400 and r.json["errors"][0]["field"] == field, (bad, r)
    for bad in ({}, {"disk_bytes": 3}):
        r = srv.request("PUT", "/api/v1/quotas/users/alice", body=bad)
        assert r.status == 400 and r.json["code"] == "invalid-body", (bad, r)
    r = srv.request("PUT", "/api/v1/quotas/users/alice", body=body)
    assert r.status == 200, r
    assert r.json["artifact_bytes"] == {"limit": 5000, "used": 800, "default": False}, r.json
    _, r = upload(srv, b"y" * 800, token=alice)
    assert r.status == 200, r
    # Bob keeps the server's default; null gives alice the default back.
    _, r = upload(srv, b"z" * 1200, token=bob)
    assert r.status == 403, r
    r = srv.request("PUT", "/api/v1/quotas/users/alice", body={"artifact_bytes": None})
    assert r.status == 200 and r.json["artifact_bytes"]["default"] is True, r
    assert r.json["artifact_bytes"]["limit"] == 1000 and r.json["artifact_bytes"]["used"] == 1600
    assert r.json["cpus"] == {"limit": 0, "used": 0, "default": True}, r.json


def test_a_users_running_cpus_wait_for_their_quota(server_factory, agent_factory, tmp_path):
    srv = server_factory(extra_args=("--max-cpus-per-user", "1"))
    agent_factory(srv=srv, cpus=4)
    alice = srv.create_token("alice", "user")
    bob = srv.create_token("bob", "user")
    gate = tmp_path / "gate"
    os.chmod(tmp_path, 0o777)
    wait_gate = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.1)\n"
    spec = {"entrypoint": [PY, "-c", wait_gate], "working_dir": "/tmp",
            "scaling_config": {"resources_per_worker": {"CPU": 1}}}
    first = srv.submit(dict(spec, name="first"), token=alice)["id"]
    srv.wait_job(first, {"RUNNING"})
    second = srv.submit(dict(spec, name="second"), token=alice)["id"]
    # The node has room, but alice's workers hold her one CPU: hers waits, bob's runs.
    other = srv.submit(dict(spec, name="other"), token=bob)["id"]
    srv.wait_job(other, {"RUNNING"})
    job = wait_for(lambda: (lambda j: j if "quota of CPUs" in (j.get("status_message") or "")
                            else None)(srv.request("GET", f"/api/v1/jobs/{second}").json),
                   what="quota message")
    assert job["status"] == "PENDING" and "alice" in job["status_message"], job
    r = srv.request("GET", "/api/v1/quotas/users/alice", token=alice)
    assert r.json["cpus"] == {"limit": 1, "used": 1.0, "default": True}, r.json
    # An admin gives alice two CPUs: her second job starts.
    r = srv.request("PUT", "/api/v1/quotas/users/alice", body={"cpus": 2})
    assert r.status == 200 and r.json["cpus"]["limit"] == 2, r
    srv.wait_job(second, {"RUNNING"})
    gate.write_text("go")
    for j in (first, second, other):
        assert srv.wait_job(j, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"


def test_abandoned_uploads_are_removed_after_upload_stale_s(server_factory):
    srv = server_factory(extra_args=("--upload-stale-s", "1"))
    alice = srv.create_token("alice", "user")
    data = b"p" * 5000
    sha = hashlib.sha256(data).hexdigest()
    r = put_chunk(srv, sha, data[:2000], token=alice)
    assert r.status == 200 and r.json["offset"] == 2000, r
    staged = os.path.join(srv.data_dir, "artifacts", "uploads", f"code-{sha}")
    assert os.path.exists(staged)
    # Nobody resumes it: the server's GC removes it.
    wait_for(lambda: not os.path.exists(staged), what="the abandoned upload removed")
    r = srv.request("GET", f"/api/v1/code/{sha}", token=alice)
    assert r.status == 200 and r.json["state"] == "missing" and r.json["offset"] == 0, r
    r = srv.request("POST", f"/api/v1/code/{sha}/complete", body={}, token=alice)
    assert r.status == 409 and r.json["code"] == "upload-offset", r
    # A client that comes back starts again from offset 0, and gets there.
    r = put_chunk(srv, sha, data[:2000], offset=2000, token=alice)
    assert r.status == 409 and r.json["code"] == "upload-offset", r
    _, r = upload(srv, data, token=alice)
    assert r.status == 200 and r.json["state"] == "complete", r


# ---- finding 12: report volume in bytes ----------------------------------------------------------

REPORT_FLOOD = textwrap.dedent("""
    import trainyard
    for step in range(60):
        trainyard.report({**{f"metric_with_a_long_name_{i:03d}": float(step) for i in range(40)},
                          "step": step})
    print("reported", flush=True)
""")


def test_reports_past_the_byte_cap_are_refused_with_an_event(server_factory, agent_factory):
    # One report is ~1.9 KB of metrics: the cap holds about ten of the sixty.
    srv = server_factory(extra_args=("--max-report-bytes-per-job", "20000"))
    agent = agent_factory(srv=srv)
    job = srv.submit({"name": "flood", "entrypoint": [PY, "-c", REPORT_FLOOD],
                      "working_dir": "/tmp"})["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", (done, agent.worker_log(job, 0))
    # Every report is acked (the refused ones too): the agent's spool empties.
    spool = os.path.join(agent.data_dir, "spool")
    wait_for(lambda: os.listdir(spool) == [], what="spool emptied")
    found = [m for m in events(srv, job) if "max-report-bytes-per-job" in m]
    assert len(found) == 1 and "refused" in found[0], events(srv, job)
    points = srv.request("GET", f"/api/v1/jobs/{job}/metrics?name=metric_with_a_long_name_000")
    assert points.status == 200, points
    steps = {p["step"] for p in points.json["metrics"]}
    assert 5 <= len(steps) < 30, steps
    healthy(srv)
