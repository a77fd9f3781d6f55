"""Issue 22, finding 13 ("every role reads every job"): projects. Bob's job in his private project
is seen by its members and admins only: another user (alice) and a viewer get the 404 of a job
that does not exist on every route about it (the job, its workers, events, attempts, metrics,
logs, checkpoints and checkpoint archive, stop, delete), do not find it in GET /jobs, and get
none of its rows on /stream. Adding alice as a member shows it to her. Before projects, every
role read every job. A checkpoint of a project's job and a code package one of its jobs names are
used (resume_from_checkpoint, code_package) by the members and admins only."""
import io
import json
import os
import tarfile
import textwrap

import harness
from test_checkpoints import wait_checkpoints
from test_isolation_server import upload
from test_stream import Sub

PY = "/usr/bin/python3"

# Logs a line, reports a metric and a checkpoint: something on every read path.
WRITER = textwrap.dedent("""
    import os, shutil, tempfile
    import trainyard
    print("bob's secret log line", flush=True)
    d = tempfile.mkdtemp(prefix="ty-proj-")
    with open(os.path.join(d, "weights.txt"), "w") as f:
        f.write("bob's weights")
    trainyard.report({"loss": 0.25, "step": 3}, checkpoint=d)
    shutil.rmtree(d)
""")


def package(files):
    """A code package (a gzipped tar) of files {name: text}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def job_routes(job, ck):
    """Every GET under /api/v1/jobs/{id} and /api/v1/checkpoints/{id}."""
    return [f"/api/v1/jobs/{job}", f"/api/v1/jobs/{job}/workers", f"/api/v1/jobs/{job}/events",
            f"/api/v1/jobs/{job}/attempts", f"/api/v1/jobs/{job}/metrics",
            f"/api/v1/jobs/{job}/logs", f"/api/v1/jobs/{job}/checkpoints",
            f"/api/v1/checkpoints/{ck}", f"/api/v1/checkpoints/{ck}/archive"]


def assert_not_found(server, token, job, ck):
    for path in job_routes(job, ck):
        r = server.request("GET", path, token=token)
        assert r.status == 404, (path, r)
        if "/checkpoints/" in path and "/jobs/" not in path:
            assert r.json["detail"] == f"there is no checkpoint {ck}", (path, r)
        else:  # word for word the answer for a job that does not exist
            assert r.json["code"] == "job-not-found", (path, r)
            assert r.json["detail"] == f"there is no job {job}", (path, r)
    for method, path in (("POST", f"/api/v1/jobs/{job}/stop"), ("DELETE", f"/api/v1/jobs/{job}")):
        r = server.request(method, path, token=token)
        assert r.status in (404, 403), (path, r)  # a viewer is refused by role first
        if r.status == 404:
            assert r.json["code"] == "job-not-found", (path, r)


def listed(server, token, **query):
    q = "&".join(f"{k}={v}" for k, v in query.items())
    r = server.request("GET", "/api/v1/jobs" + (f"?{q}" if q else ""), token=token)
    assert r.status == 200, r
    return [j["id"] for j in r.json["jobs"]]


def cluster_rows_until(sub, marker):
    """Reads sub's cluster stream until the first row about job `marker`; returns the job ids of
    the rows before it. Rows come in seq order, so nothing older can follow."""
    ids = []
    while True:
        m = sub.next()
        if m["type"] == "event" and m.get("cluster") and m["kind"] == "job":
            if m["data"]["id"] == marker:
                return ids
            ids.append(m["data"]["id"])


def test_a_private_projects_jobs_are_seen_by_members_and_admins_only(server, agent_factory):
    bob = server.create_token("bob", "user")
    alice = server.create_token("alice", "user")
    viewer = server.create_token("watcher", "viewer")
    agent_factory(cpus=1)

    alice_live = Sub(server, token=alice)
    alice_live.subscribe()  # the cluster stream, live from now

    r = server.request("POST", "/api/v1/projects", {"name": "bobs-lab", "visibility": "private"},
                       token=bob)
    assert r.status == 201, r
    assert r.json["members"] == ["bob"] and r.json["visibility"] == "private"

    work = harness.make_tmpdir("ty-proj-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WRITER)
    job = server.submit({"name": "secret-run", "project": "bobs-lab",
                         "entrypoint": [PY, "train.py"], "working_dir": work}, token=bob)["id"]
    done = server.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    assert done["project"] == "bobs-lab"
    [ck] = wait_checkpoints(server, job, 1)
    # A shared job submitted after it: its cluster rows come after every row of bob's job.
    marker = server.submit({"name": "marker", "entrypoint": ["true"]}, token=bob)["id"]

    # The owner and an admin read everything.
    for token in (bob, "admin"):
        for path in job_routes(job, ck["id"]):
            r = server.request("GET", path, token=token)
            assert r.status in (200, 206, 409), (path, r)  # 409: archive not (yet) stored
        assert job in listed(server, token)
        assert job in listed(server, token, project="bobs-lab")

    # A user who is not a member and a viewer: as if the job did not exist.
    for token in (alice, viewer):
        assert_not_found(server, token, job, ck["id"])
        assert job not in listed(server, token)
        assert marker in listed(server, token)
        assert listed(server, token, project="bobs-lab") == []
        names = [p["name"] for p in server.request("GET", "/api/v1/projects",
                                                   token=token).json["projects"]]
        assert "bobs-lab" not in names and "default" in names
        r = server.request("GET", "/api/v1/projects/bobs-lab", token=token)
        assert r.status == 404 and r.json["code"] == "project-not-found", r
        s = Sub(server, token=token)
        s.ws.send_json({"type": "subscribe", "job": job, "after": 0})
        err = s.next()
        assert err["type"] == "error" and err["code"] == "unknown_job", err
        s.subscribe()  # the cluster stream from its start (catch-up)
        assert job not in cluster_rows_until(s, marker)
        s.close()
    assert job not in cluster_rows_until(alice_live, marker)  # live rows
    admin_sub = Sub(server)
    admin_sub.subscribe()
    assert job in cluster_rows_until(admin_sub, marker)
    admin_sub.close()

    # alice cannot submit into it, nor add herself.
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true", "project": "bobs-lab"},
                       token=alice)
    assert r.status == 404 and r.json["code"] == "project-not-found", r
    assert r.json["errors"][0]["field"] == "project"
    r = server.request("POST", "/api/v1/projects/bobs-lab/members", {"user": "alice"}, token=alice)
    assert r.status == 404 and r.json["code"] == "project-not-found", r
    # Nor use its checkpoint, or bob's package that a job of the project names, known by id and
    # hash: the checkpoint is not found (its job is not hers to see), the package not hers.
    sha, r = upload(server, package({"train.py": "print('bob')\n"}), token=bob)
    assert r.status == 200, r
    assert server.request("POST", "/api/v1/jobs", token=bob,
                          body={"entrypoint": "true", "project": "bobs-lab",
                                "code_package": sha}).status == 201
    uses = (("resume_from_checkpoint", ck["id"]), ("code_package", sha))
    for (field, value), code in zip(uses, ("checkpoint-not-found", "package-forbidden")):
        r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true", field: value},
                           token=alice)
        assert r.status in (403, 422) and r.json["code"] == code, r
        assert r.json["errors"][0]["field"] == field, r

    # A member adds her: now she sees it, on every path.
    r = server.request("POST", "/api/v1/projects/bobs-lab/members", {"user": "alice"}, token=bob)
    assert r.status == 200 and r.json["members"] == ["alice", "bob"], r
    for path in job_routes(job, ck["id"]):
        r = server.request("GET", path, token=alice)
        assert r.status in (200, 206, 409), (path, r)
    assert job in listed(server, alice, project="bobs-lab")
    s = Sub(server, token=alice)
    s.subscribe(job)
    assert s.read_until(lambda m: m["type"] == "event" and m["kind"] == "log")["job"] == job
    s.close()
    assert server.request("POST", "/api/v1/jobs", {"entrypoint": "true", "project": "bobs-lab"},
                          token=alice).status == 201
    for field, value in uses:  # as a member she uses them, in the project or out of it
        for project in ("bobs-lab", "default"):
            r = server.request("POST", "/api/v1/jobs", token=alice,
                               body={"entrypoint": "true", "project": project, field: value})
            assert r.status == 201, (field, project, r)
    # The viewer is still kept out.
    assert_not_found(server, viewer, job, ck["id"])
    alice_live.close()


def test_projects_names_and_shared_projects(server):
    bob = server.create_token("bob", "user")
    alice = server.create_token("alice", "user")
    viewer = server.create_token("watcher", "viewer")
    for bad, why in (("Big", "lowercase"), ("-x", "start"), ("", "1 to 64"), ("a" * 65, "1 to 64"),
                     ("a b", "only")):
        r = server.request("POST", "/api/v1/projects", {"name": bad}, token=bob)
        assert r.status == 400, r
        assert r.json["errors"][0]["field"] == "name" and why in r.json["errors"][0]["detail"], r
    for body, field in (({"name": "p", "visibility": "public"}, "visibility"),
                        ({"name": "p", "members": "alice"}, "members"),
                        ({"name": "p", "members": [""]}, "members"),
                        ({"name": "p", "colour": "red"}, "colour")):
        r = server.request("POST", "/api/v1/projects", body, token=bob)
        assert r.status == 400 and r.json["errors"][0]["field"] == field, r
    r = server.request("POST", "/api/v1/projects", {"name": "p"}, token=viewer)
    assert r.status == 403, r
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true", "project": "No"}, token=bob)
    assert r.status == 400 and r.json["errors"][0]["field"] == "project", r
    r = server.request("POST", "/api/v1/jobs", {"entrypoint": "true", "project": "nowhere"},
                       token=bob)
    assert r.status == 404 and r.json["code"] == "project-not-found", r
    r = server.request("GET", "/api/v1/jobs?project=No%20Such", token=bob)
    assert r.status == 400 and r.json["errors"][0]["field"] == "project", r

    r = server.request("POST", "/api/v1/projects",
                       {"name": "team.shared", "visibility": "shared", "members": ["carol"]},
                       token=bob)
    assert r.status == 201 and r.json["members"] == ["bob", "carol"], r
    r = server.request("POST", "/api/v1/projects", {"name": "team.shared"}, token=alice)
    assert r.status == 409 and r.json["code"] == "project-exists", r
    # A shared project's jobs are everyone's to read; any user may submit into it, but only
    # members and admins add members.
    job = server.submit({"entrypoint": "true", "project": "team.shared"}, token=alice)["id"]
    assert server.request("GET", f"/api/v1/jobs/{job}", token=viewer).status == 200
    assert listed(server, viewer, project="team.shared") == [job]
    assert listed(server, viewer, project="default") == []
    r = server.request("POST", "/api/v1/projects/team.shared/members", {"user": "alice"},
                       token=alice)
    assert r.status == 403, r
    r = server.request("POST", "/api/v1/projects/team.shared/members", {"user": "alice"})
    assert r.status == 200 and r.json["members"] == ["alice", "bob", "carol"], r
    r = server.request("POST", "/api/v1/projects/team.shared/members", {"who": "x"}, token=bob)
    assert r.status == 400, r
    r = server.request("GET", "/api/v1/projects/default", token=viewer)
    assert r.status == 200 and r.json["visibility"] == "shared", r
    # Private by default; admins see every project.
    r = server.request("POST", "/api/v1/projects", {"name": "alices"}, token=alice)
    assert r.status == 201 and r.json["visibility"] == "private", r
    names = [p["name"] for p in server.request("GET", "/api/v1/projects").json["projects"]]
    assert names == ["alices", "default", "team.shared"]
    names = [p["name"] for p in server.request("GET", "/api/v1/projects",
                                               token=bob).json["projects"]]
    assert names == ["default", "team.shared"]

    # Members leave or are removed by a member; a non-member of a shared project may not remove
    # anyone; the last member of a private project stays; a project goes once its jobs have.
    r = server.request("DELETE", "/api/v1/projects/team.shared/members/carol", token=viewer)
    assert r.status == 403, r
    r = server.request("DELETE", "/api/v1/projects/alices/members/alice", token=bob)
    assert r.status == 404 and r.json["code"] == "project-not-found", r
    r = server.request("DELETE", "/api/v1/projects/team.shared/members/bob", token=alice)
    assert r.status == 200 and r.json["members"] == ["alice", "carol"], r
    r = server.request("DELETE", "/api/v1/projects/team.shared/members/bob", token=alice)
    assert r.status == 404 and r.json["code"] == "member-not-found", r
    r = server.request("DELETE", "/api/v1/projects/team.shared/members/carol", token=bob)
    assert r.status == 403 and "only members" in r.json["detail"], r
    r = server.request("DELETE", "/api/v1/projects/alices/members/alice", token=alice)
    assert r.status == 409 and r.json["code"] == "project-last-member", r
    assert server.request("POST", "/api/v1/projects/alices/members", {"user": "bob"},
                          token=alice).status == 200
    r = server.request("DELETE", "/api/v1/projects/alices/members/alice", token=alice)
    assert r.status == 204, r  # she left: it is bob's now, and hidden from her
    assert server.request("GET", "/api/v1/projects/alices", token=alice).status == 404
    assert server.request("GET", "/api/v1/projects/alices", token=bob).json["members"] == ["bob"]
    r = server.request("DELETE", "/api/v1/projects/team.shared", token=bob)
    assert r.status == 403, r
    r = server.request("DELETE", "/api/v1/projects/team.shared", token=alice)
    assert r.status == 409 and r.json["code"] == "project-not-empty", r
    assert "1 job" in r.json["detail"], r
    assert server.request("DELETE", "/api/v1/projects/default").status == 403
    assert server.request("POST", f"/api/v1/jobs/{job}/stop", token=alice).status == 202
    assert server.request("DELETE", f"/api/v1/jobs/{job}", token=alice).status == 204
    r = server.request("PUT", "/api/v1/quotas/projects/team.shared", {"cpus": 4})
    assert r.status == 200, r
    assert server.request("DELETE", "/api/v1/projects/team.shared", token=alice).status == 204
    assert server.request("GET", "/api/v1/projects/team.shared").status == 404
    r = server.request("POST", "/api/v1/projects", {"name": "team.shared"}, token=alice)
    assert r.status == 201, r
    r = server.request("GET", "/api/v1/quotas/projects/team.shared")
    assert r.json["cpus"]["limit"] in (0, None), r  # its old quota went with it


def test_cli_projects(server, tmp_path):
    bob = server.create_token("bob", "user")
    alice = server.create_token("alice", "user")

    def cli(*args, token=bob):
        return harness.run_cli(server, *args, token=token)

    r = cli("project", "create", "lab", "--member", "carol", "--member", "dave")
    assert r.returncode == 0, r.stderr
    assert "project lab (private), members: bob carol dave" in r.stdout
    r = cli("project", "create", "open", "--shared")
    assert r.returncode == 0 and "(shared)" in r.stdout, r.stderr
    r = cli("project", "create", "Bad Name")
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "name" in r.stderr, r
    r = cli("project", "create", "x", "--private", "--shared")
    assert r.returncode == 2 and "exclude" in r.stderr, r
    r = cli("project", "create", "lab")
    assert r.returncode == 1 and "already exists" in r.stderr, r

    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "in-lab", "entrypoint": ["true"]}))
    r = cli("submit", str(spec), "--project", "lab")
    assert r.returncode == 0, r.stderr
    job = int(r.stdout.strip())
    assert server.request("GET", f"/api/v1/jobs/{job}").json["project"] == "lab"
    r = cli("submit", str(spec), "--project", "lab", token=alice)
    assert r.returncode == 1 and "project" in r.stderr, r
    r = cli("get", str(job), token=alice)
    assert r.returncode == 1 and f"there is no job {job}" in r.stderr, r
    r = cli("list", "--project", "lab")
    assert r.returncode == 0 and "in-lab" in r.stdout, r.stderr
    assert "in-lab" not in cli("list", token=alice).stdout

    r = cli("project", "list", token=alice)
    assert r.returncode == 0, r.stderr
    names = [line.split()[0] for line in r.stdout.splitlines()[1:] if line.strip()]
    assert names == ["default", "open"]
    r = cli("project", "add-member", "lab", "alice", token=alice)
    assert r.returncode == 1 and "no project 'lab'" in r.stderr, r
    r = cli("project", "add-member", "lab", "alice")
    assert r.returncode == 0 and "members: alice bob carol dave" in r.stdout, r.stderr
    r = cli("-o", "json", "project", "list", token=alice)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == server.request("GET", "/api/v1/projects", token=alice).json
    assert cli("get", str(job), token=alice).returncode == 0

    r = cli("project", "remove-member", "lab", "carol", token=alice)
    assert r.returncode == 0 and "members: alice bob dave" in r.stdout, r.stderr
    r = cli("project", "remove-member", "lab", "carol", token=alice)
    assert r.returncode == 1 and "not a member" in r.stderr, r
    r = cli("project", "delete", "lab")
    assert r.returncode == 1 and "has 1 job" in r.stderr, r
    r = cli("project", "create", "solo", token=alice)
    assert r.returncode == 0, r.stderr
    r = cli("project", "add-member", "solo", "bob", token=alice)
    assert r.returncode == 0, r.stderr
    r = cli("project", "remove-member", "solo", "alice", token=alice)
    assert r.returncode == 0 and "you left the project" in r.stdout, (r.stdout, r.stderr)
    r = cli("project", "create", "empty")
    assert r.returncode == 0, r.stderr
    r = cli("project", "delete", "empty")
    assert r.returncode == 0 and "project empty deleted" in r.stdout, r.stderr
