"""Issue 26: tags and notes on jobs, and goodput with the startup breakdown.

Tags and notes are set at submit (spec.tags, spec.notes) and later with PATCH /api/v1/jobs/{id}
by the job's owner or an admin (a viewer or another user is refused), and GET /api/v1/jobs?tag=
filters by them. Every attempt of GET /api/v1/jobs/{id}/attempts has its `startup` breakdown and
useful/lost training seconds, the job its `goodput`, /metrics the sums per owner. One server and
one agent for the whole file; plain Python workers."""
import json
import os
import textwrap

import pytest

import harness

PY = "/usr/bin/python3"

QUICK = textwrap.dedent("""
    import time
    import trainyard
    for i in range(3):
        trainyard.report({"loss": 1.0 / (i + 1)})
        time.sleep(0.1)
""")

# The first attempt reports, trains a little more, then fails without a checkpoint: that time is
# lost. The second attempt succeeds.
FAILS_ONCE = textwrap.dedent("""
    import os, sys, time
    import trainyard
    trainyard.report({"loss": 1.0})
    time.sleep(0.3)
    if os.environ["TRAINYARD_ATTEMPT"] == "1":
        sys.exit(3)
""")

PHASES = ("queue_s", "placement_s", "code_fetch_s", "checkpoint_fetch_s", "process_start_s",
          "framework_init_s", "first_report_s")


@pytest.fixture(scope="module")
def cluster(session_pg):
    name = session_pg.create_database()
    srv = harness.Server(database_url=session_pg.url(name)).start()
    agent = harness.Agent(srv, cpus=2).start()
    tokens = {n: srv.create_token(n, role) for n, role in
              (("alice", "user"), ("bob", "user"), ("val", "viewer"))}
    yield srv, tokens
    assert agent.stop() == 0, agent.log_text()
    assert srv.stop() == 0, srv.log_text()
    session_pg.drop_database(name)


def spec_for(script, **extra):
    work = harness.make_tmpdir("ty-goodput-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(script)
    spec = {"name": "goodput", "entrypoint": [PY, "train.py"], "working_dir": work}
    spec.update(extra)
    return spec


def fields(reply):
    return [e["field"] for e in reply.json.get("errors", [])]


def check_breakdown(srv, job_id, done):
    attempts = srv.request("GET", f"/api/v1/jobs/{job_id}/attempts").json["attempts"]
    goodput = done["goodput"]
    assert 0 < goodput["ratio"] <= 1, goodput
    assert goodput["useful_s"] > 0 and goodput["wall_s"] > 0, goodput
    startup_sum = 0
    for a in attempts:
        s = a["startup"]
        assert set(s) == set(PHASES), s
        # process_start_s is the agent's (worker_started); these jobs fetch no code or checkpoint.
        for phase in ("queue_s", "placement_s", "process_start_s", "framework_init_s",
                      "first_report_s"):
            assert s[phase] is not None and s[phase] >= 0, (phase, a)
        # Useful time starts at the first SDK contact, where framework_init_s ends, so the
        # phases before it and the useful time never overlap; first_report_s (SDK contact ->
        # first report) lies inside the useful time by definition (ty_attempt_startup.sql).
        startup_sum += sum(v for k, v in s.items() if v is not None and k != "first_report_s")
        assert a["useful_s"] >= 0 and a["lost_s"] >= 0, a
    assert startup_sum + goodput["useful_s"] <= goodput["wall_s"] + 1e-3, (attempts, goodput)
    return attempts, goodput


def test_tags_notes_owner_only_filter_and_a_quick_jobs_startup(cluster):
    srv, tok = cluster
    bad = srv.request("POST", "/api/v1/jobs", spec_for(QUICK, tags=["no spaces"]),
                      token=tok["alice"])
    assert bad.status == 400 and bad.json["errors"][0]["field"] == "tags", bad
    job = srv.submit(spec_for(QUICK, tags=["exp-26", "lr:0.1", "exp-26"], notes="first try"),
                     token=tok["alice"])
    jid = job["id"]
    assert job["tags"] == ["exp-26", "lr:0.1"] and job["notes"] == "first try", job

    # Who may change them: the owner and admins; a viewer and another user are refused.
    path = f"/api/v1/jobs/{jid}"
    r = srv.request("PATCH", path, {"tags": ["x"]}, token=tok["val"])
    assert r.status == 403, r
    r = srv.request("PATCH", path, {"notes": "mine now"}, token=tok["bob"])
    assert r.status == 403 and "another user" in r.json["detail"], r
    for body, field in (({"tags": ["bad tag"]}, "tags"), ({"notes": 3}, "notes"),
                        ({"tags": ["a"], "owner": "bob"}, None), ({}, None)):
        r = srv.request("PATCH", path, body, token=tok["alice"])
        assert r.status == 400 and fields(r) == ([field] if field else []), (body, r)
    assert srv.request("PATCH", "/api/v1/jobs/999999", {"notes": ""}).status == 404
    cli = harness.run_cli(srv, "tag", str(jid), "exp-26", "best", "--notes", "keep this one",
                          token=tok["alice"])
    assert cli.returncode == 0 and "best" in cli.stdout, cli
    cli = harness.run_cli(srv, "tag", str(jid), "bad tag", token=tok["alice"])
    assert cli.returncode != 0 and "tags" in cli.stderr, cli
    r = srv.request("GET", path, token=tok["val"])
    assert r.json["tags"] == ["best", "exp-26"] and r.json["notes"] == "keep this one", r
    r = srv.request("PATCH", path, {"notes": "admin note"})
    assert r.status == 200 and r.json["tags"] == ["best", "exp-26"], r

    other = srv.submit(spec_for(QUICK, tags=["exp-other"]), token=tok["bob"])["id"]
    listed = srv.request("GET", "/api/v1/jobs?tag=best", token=tok["val"]).json["jobs"]
    assert [j["id"] for j in listed] == [jid], listed
    listed = srv.request("GET", "/api/v1/jobs?tag=exp-other").json["jobs"]
    assert [j["id"] for j in listed] == [other], listed
    r = srv.request("GET", "/api/v1/jobs?tag=a%20b")
    assert r.status == 400 and fields(r) == ["tag"], r
    cli = harness.run_cli(srv, "list", "--tag", "best", "-o", "json")
    listed = json.loads(cli.stdout)
    listed = listed["jobs"] if isinstance(listed, dict) else listed
    assert cli.returncode == 0 and [j["id"] for j in listed] == [jid], cli

    done = srv.wait_job(jid, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    attempts, goodput = check_breakdown(srv, jid, done)
    assert len(attempts) == 1 and attempts[0]["lost_s"] == 0, attempts
    srv.wait_job(other, {"SUCCEEDED", "FAILED"})

    g = srv.request("GET", "/api/v1/goodput", token=tok["val"]).json
    owners = {o["owner"]: o for o in g["owners"]}
    assert owners["alice"]["useful_s"] > 0 and 0 < g["cluster"]["ratio"] <= 1, g
    prom = srv.request("GET", "/metrics").text
    assert 'trainyard_goodput_useful_seconds{owner="alice"}' in prom, prom
    assert "trainyard_goodput_ratio " in prom


def test_work_lost_to_a_restart_lowers_goodput(cluster):
    srv, tok = cluster
    jid = srv.submit(spec_for(FAILS_ONCE, run_config={"failure_config": {"max_failures": 1}}),
                     token=tok["alice"])["id"]
    done = srv.wait_job(jid, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 2, done
    attempts, goodput = check_breakdown(srv, jid, done)
    first, second = attempts
    # No checkpoint in attempt 1: all of its training is lost; attempt 2 kept its work.
    assert first["useful_s"] == 0 and first["lost_s"] > 0, first
    assert second["useful_s"] > 0 and second["lost_s"] == 0, second
    assert goodput["lost_s"] == pytest.approx(first["lost_s"]), goodput
    assert goodput["ratio"] < 1
