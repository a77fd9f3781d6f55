"""Issue 22: quotas per project, next to the user's, tried with a real server, agent and workers.
A project's running CPUs are bounded at scheduling time like a user's: a job that would pass its
project's quota waits PENDING with a status_message naming the project quota while a job in
another project runs. Only an admin sets a project's quotas; a private project's quotas are not
shown to a non-member (404, as for a project that does not exist). Checkpoint parts of a
project's jobs count against its artifact_bytes."""
import json
import os
import time

import harness
from test_isolation_server import artifact_state, events, submit_checkpointer

PY = "/usr/bin/python3"


wait_for = harness.wait_for


def create_project(srv, token, name, visibility="private"):
    r = srv.request("POST", "/api/v1/projects", {"name": name, "visibility": visibility},
                    token=token)
    assert r.status == 201, r


def test_a_projects_running_cpus_wait_for_its_quota(server_factory, agent_factory, tmp_path):
    srv = server_factory()
    agent_factory(srv=srv, cpus=4)
    alice = srv.create_token("alice", "user")
    create_project(srv, alice, "lab-a")
    r = srv.request("PUT", "/api/v1/quotas/projects/lab-a", body={"cpus": 1})
    assert r.status == 200, r
    assert r.json["subject_kind"] == "project" and r.json["subject"] == "lab-a", r.json
    assert r.json["cpus"] == {"limit": 1, "used": 0, "default": False}, r.json
    gate = tmp_path / "gate"
    os.chmod(tmp_path, 0o777)
    wait_gate = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.1)\n"
    spec = {"entrypoint": [PY, "-c", wait_gate], "working_dir": "/tmp",
            "scaling_config": {"resources_per_worker": {"CPU": 1}}}
    first = srv.submit(dict(spec, name="first", project="lab-a"), token=alice)["id"]
    srv.wait_job(first, {"RUNNING"})
    second = srv.submit(dict(spec, name="second", project="lab-a"), token=alice)["id"]
    # The node has room and alice has no quota of her own, but lab-a's workers hold its one CPU:
    # the second lab-a job waits, the same user's job in another project runs.
    other = srv.submit(dict(spec, name="other"), token=alice)["id"]
    srv.wait_job(other, {"RUNNING"})
    job = wait_for(lambda: (lambda j: j if "project's quota" in (j.get("status_message") or "")
                            else None)(srv.request("GET", f"/api/v1/jobs/{second}").json),
                   what="project quota message")
    assert job["status"] == "PENDING" and "project lab-a" in job["status_message"], job
    r = srv.request("GET", "/api/v1/quotas/projects/lab-a", token=alice)
    assert r.status == 200, r
    assert r.json["cpus"] == {"limit": 1, "used": 1.0, "default": False}, r.json
    # An admin lifts the project limit (null): the second job starts.
    r = srv.request("PUT", "/api/v1/quotas/projects/lab-a", body={"cpus": None})
    assert r.status == 200 and r.json["cpus"] == {"limit": 0, "used": 1.0, "default": True}, r
    srv.wait_job(second, {"RUNNING"})
    gate.write_text("go")
    for j in (first, second, other):
        assert srv.wait_job(j, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"


def test_only_admins_set_and_only_members_read_a_projects_quotas(server_factory):
    srv = server_factory()
    alice = srv.create_token("alice", "user")
    bob = srv.create_token("bob", "user")
    create_project(srv, alice, "secret-lab")
    create_project(srv, alice, "open-lab", visibility="shared")
    path = "/api/v1/quotas/projects/secret-lab"
    # A member who is not an admin may not set it.
    r = srv.request("PUT", path, body={"cpus": 64}, token=alice)
    assert r.status == 403, r
    r = srv.request("PUT", path, body={"cpus": 64}, token=bob)
    assert r.status == 403, r
    # A non-member learns nothing about a private project: the 404 of one that does not exist.
    r = srv.request("GET", path, token=bob)
    assert r.status == 404 and r.json["code"] == "project-not-found", r
    missing = srv.request("GET", "/api/v1/quotas/projects/no-such-lab", token=bob)
    assert missing.status == 404 and missing.json["code"] == "project-not-found", missing
    assert r.json["detail"].replace("secret-lab", "X") == \
        missing.json["detail"].replace("no-such-lab", "X"), (r.json, missing.json)
    # A shared project is seen by all, its quotas read by its members and admins only.
    r = srv.request("GET", "/api/v1/quotas/projects/open-lab", token=bob)
    assert r.status == 403, r
    r = srv.request("GET", path, token=alice)
    assert r.status == 200 and r.json["subject_kind"] == "project", r
    assert r.json["artifact_bytes"] == {"limit": 0, "used": 0, "default": True}, r.json
    # An admin: a project that does not exist is a 404, not a new row; bad bodies are a 400.
    r = srv.request("PUT", "/api/v1/quotas/projects/no-such-lab", body={"cpus": 1})
    assert r.status == 404 and r.json["code"] == "project-not-found", r
    r = srv.request("PUT", path, body={"gpus": -1})
    assert r.status == 400 and r.json["errors"][0]["field"] == "gpus", r
    r = srv.request("PUT", path, body={"disk_bytes": 3})
    assert r.status == 400 and r.json["code"] == "invalid-body", r
    r = srv.request("PUT", path, body={"artifact_bytes": 5000, "gpus": 2})
    assert r.status == 200, r
    assert r.json["artifact_bytes"] == {"limit": 5000, "used": 0, "default": False}, r.json
    assert r.json["gpus"]["limit"] == 2 and r.json["cpus"]["default"] is True, r.json
    assert srv.request("GET", path, token=alice).json["gpus"]["limit"] == 2


def test_a_projects_checkpoints_count_against_its_artifact_quota(server_factory, agent_factory):
    srv = server_factory()
    agent_factory(srv=srv, cpus=2)
    alice = srv.create_token("alice", "user")
    create_project(srv, alice, "lab-a")
    r = srv.request("PUT", "/api/v1/quotas/projects/lab-a", body={"artifact_bytes": 1000})
    assert r.status == 200, r
    # The first checkpoint starts under the quota and is taken whole (4096 bytes and more).
    first = submit_checkpointer(srv, alice, "first", project="lab-a")
    assert srv.wait_job(first, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    wait_for(lambda: artifact_state(srv, first) == "complete", what="first checkpoint stored")
    used = srv.request("GET", "/api/v1/quotas/projects/lab-a", token=alice).json
    assert used["artifact_bytes"]["used"] > 1000, used
    # The project is now past its quota: the next lab-a checkpoint is refused naming the project
    # quota; alice's checkpoint in another project (her own quota is the server's) is stored.
    second = submit_checkpointer(srv, alice, "second", project="lab-a")
    other = submit_checkpointer(srv, alice, "other")
    for job in (second, other):
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    wait_for(lambda: artifact_state(srv, other) == "complete", what="other checkpoint stored")
    found = wait_for(lambda: [m for m in events(srv, second) if "artifact quota" in m],
                     what="quota event")
    assert "project lab-a" in found[0] and "1000" in found[0], found
    assert artifact_state(srv, second) != "complete"


def test_cli_project_quota_and_set_quota(server_factory):
    srv = server_factory()
    alice = srv.create_token("alice", "user")
    bob = srv.create_token("bob", "user")
    create_project(srv, alice, "lab-a")

    def cli(*args, token="admin"):
        return harness.run_cli(srv, *args, token=token)

    r = cli("project", "set-quota", "lab-a", "--cpus", "2", "--artifact-bytes", "5000")
    assert r.returncode == 0, r.stderr
    assert "cpus" in r.stdout and "limit 2 " in r.stdout and "limit 5000 " in r.stdout, r.stdout
    r = cli("project", "quota", "lab-a", token=alice)
    assert r.returncode == 0 and "limit 2 " in r.stdout, r
    r = cli("-o", "json", "project", "quota", "lab-a", token=alice)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == srv.request("GET", "/api/v1/quotas/projects/lab-a",
                                               token=alice).json
    r = cli("project", "set-quota", "lab-a", "--cpus", "none")
    assert r.returncode == 0 and json.loads(cli("-o", "json", "project", "quota", "lab-a")
                                            .stdout)["cpus"]["default"] is True, r
    # Refusals: a non-admin, a non-member of a private project, bad values, nothing to set.
    r = cli("project", "set-quota", "lab-a", "--gpus", "1", token=alice)
    assert r.returncode != 0 and r.stderr, r
    r = cli("project", "quota", "lab-a", token=bob)
    assert r.returncode != 0 and "no project 'lab-a'" in r.stderr, r
    for bad in (("--cpus", "-1"), ("--gpus", "lots"), ()):
        r = cli("project", "set-quota", "lab-a", *bad)
        assert r.returncode != 0 and r.stderr, (bad, r)
