"""The web dashboard in a real browser: Debian's Chromium, headless, driven by playwright-core
(dashboard.mjs, one scenario per test) against a real server, PostgreSQL, agent and training jobs
started by tests/integration/harness.py. Screenshots of every page go to
<build>/browser-artifacts/ (not committed). Each test names the behaviour it checks."""
import datetime
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import harness  # noqa: E402

NODE = os.environ.get("TY_NODE", "node")
SCRIPT = os.path.join(HERE, "dashboard.mjs")
ARTIFACTS = os.path.join(harness.BUILD_DIR, "browser-artifacts")
PY = "/usr/bin/python3"

# A training program that talks and reports until it is stopped (or `steps` run out): two ranks,
# "loss" and "accuracy" at 5 reports a second, a log line per step and one error line at step 3.
TRAIN = textwrap.dedent("""
    import sys, time, trainyard
    ctx = trainyard.get_context()
    rank = ctx.get_world_rank()
    steps = int(ctx.config.get("steps", 100000))
    for step in range(1, steps + 1):
        print(f"rank {rank} step {step} loss {1.0 / step:.4f}", flush=True)
        if step == 3:
            print("ERROR: a sample error line for the viewer", file=sys.stderr, flush=True)
        trainyard.report({"loss": 1.0 / step + 0.1 * rank, "accuracy": step / (step + 10),
                          "step": step})
        time.sleep(0.2)
""")


@pytest.fixture(scope="module")
def cluster():
    pg = harness.postgres()
    db = pg.create_database()
    server = harness.Server(database_url=pg.url(db)).start()
    agent = harness.Agent(server, cpus=4).start()
    work = harness.make_tmpdir("ty-browser-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(TRAIN)
    os.makedirs(ARTIFACTS, exist_ok=True)
    c = {"pg": pg, "server": server, "agent": agent, "work": work,
         "viewer": server.create_token("vera", "viewer"),
         "user": server.create_token("uma", "user")}
    yield c
    agent.stop()
    assert server.stop() == 0, server.log_text()
    pg.drop_database(db)
    pg.stop()


def spec(c, name, steps=100000):
    return {"name": name, "entrypoint": [PY, "train.py"], "working_dir": c["work"],
            "backend": "none", "train_loop_config": {"steps": steps},
            "scaling_config": {"num_workers": 2, "resources_per_worker": {"CPU": 1}}}


def run(scenario, c, token, extra=None, steps=None, timeout=60):
    """Runs one scenario of dashboard.mjs; `steps` is a list of (line it prints, function to call
    then) for scenarios that wait on the test (e.g. a server restart). Returns its result JSON."""
    s = c["server"]
    env = dict(os.environ, TY_URL=s.url, TY_TOKEN=token or "", TY_ARTIFACTS=ARTIFACTS,
               TY_PLAYWRIGHT=os.path.join(harness.SOURCE_DIR, "web", "node_modules",
                                          "playwright-core", "index.mjs"),
               TY_ARGS=json.dumps(extra or {}))
    p = subprocess.Popen([NODE, SCRIPT, scenario], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    result = None
    waiting = list(steps or [])
    deadline = time.time() + timeout
    try:
        for line in p.stdout:
            out.append(line)
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
            if waiting and line.strip() == waiting[0][0]:
                waiting.pop(0)[1]()
                p.stdin.write("go\n")
                p.stdin.flush()
            if time.time() > deadline:
                break
        code = p.wait(timeout=max(1, deadline - time.time()))
    except subprocess.TimeoutExpired:
        code = f"none: still running after {timeout} s"  # the output so far says where
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    text = "".join(out)
    assert code == 0, f"{scenario} failed:\n{text}\nserver log:\n{s.log_text()[-3000:]}"
    return result


def test_sign_in_then_every_page_renders(cluster):
    r = run("pages", cluster, cluster["server"].admin_token)
    assert r["role"] == "admin"
    assert r["nodes"] >= 1
    # Node cards are titled by node id (several nodes may share a hostname).
    ids = {n["id"] for n in cluster["server"].request("GET", "/api/v1/nodes").json["nodes"]}
    assert set(r["nodeTitles"]) == ids, (r["nodeTitles"], ids)


def test_submitted_job_runs_charts_points_streams_logs_and_stops(cluster):
    r = run("submit_and_watch", cluster, cluster["user"],
            extra={"workdir": cluster["work"], "python": PY}, timeout=120)
    job = r["job"]
    assert cluster["server"].request("GET", f"/api/v1/jobs/{job}").json["status"] == "STOPPED"
    assert r["points"] > 0 and r["logLines"] > 0 and r["errorFound"]
    # The error line went to stderr and is marked so; the step lines (stdout) are not.
    assert r["errMark"] == ["stderr", True, '"err"'], r["errMark"]
    assert r["outMark"] == [False, "none"], r["outMark"]
    assert r["matchInfo"] == "1 matching line", r["matchInfo"]
    assert r["zoomKept"], r  # the drag's zoom is still there after live redraws
    assert r["tags"] == ["browser", "exp-b"], r  # edited on the job page (issue 26)
    got = cluster["server"].request("GET", f"/api/v1/jobs/{job}").json
    assert got["tags"] == ["browser", "exp-b"] and got["notes"] == "edited in the browser", got

    # The System tab charts both ranks' CPU and memory where the agent samples cgroups.
    if "NO CGROUPS" in cluster["agent"].log_text():
        assert r["system"] == {"empty": True}, r
    else:
        assert r["system"] == {"ranks": 2}, r


# Reports a few points and a checkpoint, then fails (exit 1) in attempt 1; attempt 2 resumes from
# the checkpoint's step (steps 4..9: it overlaps attempt 1's 4..6) and succeeds. TRAINYARD_ATTEMPT
# tells it which attempt it is. "phase" is not a number: it shows in the table of latest values,
# not as a chart.
RESTARTS = textwrap.dedent("""
    import os, sys, tempfile, time, trainyard
    attempt = int(os.environ["TRAINYARD_ATTEMPT"])
    first = 1 if attempt == 1 else 4
    for step in range(first, first + 6):
        ck = None
        if attempt == 1 and step == 3:
            ck = tempfile.mkdtemp()
            with open(os.path.join(ck, "state"), "w") as f:
                f.write(str(step))
        trainyard.report({"loss": 1.0 / step, "phase": f"attempt {attempt}", "step": step},
                         checkpoint=ck)
        print(f"attempt {attempt} step {step}", flush=True)
        time.sleep(0.1)
    if attempt == 1:
        print("attempt 1 crashed", file=sys.stderr, flush=True)
    sys.exit(1 if attempt == 1 else 0)
""")


def test_restarted_job_shows_attempt_and_checkpoint_markers_and_zooms_by_time(cluster):
    s = cluster["server"]
    with open(os.path.join(cluster["work"], "restarts.py"), "w") as f:
        f.write(RESTARTS)
    job = s.submit({"name": "restarts", "entrypoint": [PY, "restarts.py"],
                    "working_dir": cluster["work"], "backend": "none",
                    "scaling_config": {"num_workers": 1, "resources_per_worker": {"CPU": 1}},
                    "run_config": {"failure_config": {"max_failures": 1}}})["id"]
    # A second run to compare it with: another config, a flat loss.
    other = s.submit({"name": "flat", "working_dir": cluster["work"], "backend": "none",
                      "entrypoint": [PY, "-c", "import trainyard\nfor s in range(1, 4): "
                                     "trainyard.report({'loss': 0.5, 'step': s})"],
                      "train_loop_config": {"lr": 0.1},
                      "scaling_config": {"num_workers": 1, "resources_per_worker": {"CPU": 1}}})["id"]
    done = s.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED" and done["attempt"] == 2, done
    assert s.wait_job(other, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    cks = s.request("GET", f"/api/v1/jobs/{job}/checkpoints").json["checkpoints"]
    assert [(c["attempt"], c["step"]) for c in cks] == [(1, 3)], cks
    mark = f"checkpoint {cks[0]['id']}"
    r = run("restarts", cluster, cluster["viewer"],
            extra={"job": job, "checkpoint": mark, "other": other},
            timeout=120)
    assert "attempt 2" in r["stepMarkers"] and mark in r["stepMarkers"], r
    # One line per attempt (issue 26, point 1), and attempt 2's marker where attempt 2 begins (its
    # first step, 4), not where attempt 1 ended (6).
    assert r["series"] == ["rank 0 attempt 1", "rank 0 attempt 2"], r["series"]
    assert "attempt 2@4" in r["stepMarkerAt"], r["stepMarkerAt"]
    # Point 2: a short series is drawn raw, and the legend says its latest raw value.
    last = s.request("GET", f"/api/v1/jobs/{job}/metrics?name=loss").json["metrics"][-1]["value"]
    assert r["smoothed"] == "false", r
    assert r["latest"].startswith("rank 0: ") and abs(float(r["latest"][8:]) - last) <= 1e-5, r
    # Point 3: marker labels show on hover only.
    assert r["tipHidden"] and r["tipText"] == mark, r
    # Point 5: the checkpoints tab marks the latest checkpoint even when the job's reply (which
    # names it) comes after the list's; point 8: named as everywhere else.
    latest = s.request("GET", f"/api/v1/jobs/{job}").json["result"]["latest_checkpoint"]["id"]
    assert latest == cks[0]["id"], latest
    assert r["checkpointRows"] == [[f"checkpoint {latest}", "latest"]] or \
        r["checkpointRows"] == [[f"checkpoint {latest}", "bestlatest"]], r["checkpointRows"]
    assert "attempt 2" in r["timeMarkers"] and mark in r["timeMarkers"], r
    # The time-axis zoom asked the server for that time range (epoch seconds) at full detail.
    zoom = [q for q in r["zooms"] if "time_min" in q]
    assert zoom and not any("step_min" in q for q in r["zooms"]), r["zooms"]
    lo, hi = float(zoom[-1]["time_min"]), float(zoom[-1]["time_max"])
    times = [p["time"] for p in s.request(
        "GET", f"/api/v1/jobs/{job}/metrics?name=loss").json["metrics"]]
    t0, t1 = iso(times[0]), iso(times[-1])
    assert t0 < lo < hi < t1, (t0, lo, hi, t1)
    inside = [t for t in times if lo <= iso(t) <= hi]
    assert r["zoomPoints"] == len(inside) and 0 < len(inside) < len(times), (r, len(times))
    assert r["attempts"] == [["1", "FAILED"], ["2", "SUCCEEDED"]] or \
        r["attempts"] == [["2", "SUCCEEDED"], ["1", "FAILED"]], r["attempts"]
    assert any("RESTARTING" in line for line in r["timeline"]), r["timeline"]
    assert r["values"] == [["phase", "0", "9", "attempt 2"]] and r["phaseCharts"] == 0, r
    # The comparison page, opened from the jobs list with both ticked: both loss curves, the
    # settings that differ marked, each job's final loss.
    assert r["compareUrl"] == f"/compare?jobs={job},{other}", r["compareUrl"]
    assert r["compareSeries"] == f"#{job} restarts,#{other} flat", r["compareSeries"]
    assert "train_loop_config.lr" in r["differs"] and "entrypoint" in r["differs"], r["differs"]
    assert "backend" not in r["differs"], r["differs"]
    finals = [s.request("GET", f"/api/v1/jobs/{j}").json["result"]["metrics"]["loss"]
              for j in (job, other)]
    assert [float(v) for v in r["finals"]] == pytest.approx(finals, rel=1e-4), (r["finals"], finals)
    assert [float(v) for v in r["listFinals"]] == pytest.approx(finals, rel=1e-4), r["listFinals"]
    assert any("starting 1 worker on 1 node" in line for line in r["timeline"]), r["timeline"]
    # Point 6: attempt 1's output (its crash) can be read after attempt 2 ran, each line with its
    # time, unwrapped on request, and downloaded whole.
    assert r["logLines"] == r["logTimes"] == 7, r
    assert r["nowrap"], r
    assert r["download"][0] == f"job-{job}-attempt-1.log", r["download"]
    assert r["download"][1] == "".join(f"[rank 0] attempt 1 step {i}\n" for i in range(1, 7)) + \
        "[rank 0] attempt 1 crashed\n", r["download"]
    # The worker that exited with code 1 is not shown green; the one that exited 0 is.
    tones = {a: c for a, c in r["workers"]}
    assert "tone-bad" in tones["1"] and "tone-ok" in tones["2"], r["workers"]


def iso(t):
    """Seconds since the epoch of an RFC 3339 UTC time as the API writes it."""
    return datetime.datetime.fromisoformat(t.replace("Z", "+00:00")).timestamp()


def test_viewer_cannot_stop_or_submit(cluster):
    s = cluster["server"]
    job = s.submit(spec(cluster, "viewer-sees"))["id"]
    s.wait_job(job, {"RUNNING"})
    r = run("viewer", cluster, cluster["viewer"], extra={"job": job})
    assert r["stopDisabled"] and r["submitHidden"]
    assert s.request("GET", f"/api/v1/jobs/{job}").json["status"] == "RUNNING"
    s.request("POST", f"/api/v1/jobs/{job}/stop", {})
    s.wait_job(job, {"STOPPED"})


def test_bad_spec_shows_the_api_error_next_to_the_field(cluster):
    r = run("bad_spec", cluster, cluster["user"])
    assert "num_workers" in r["field"] or r["error"], r
    assert r["error"]
    # An empty working directory is refused with a message; the form's default job runs.
    assert r["workdirError"].startswith("Required:"), r
    done = cluster["server"].wait_job(r["job"], {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done


# The server restarts while the page waits: its steps have limits of their own (RESTART in
# dashboard.mjs), long enough for a machine other tests load.
def test_page_reconnects_and_resumes_after_a_server_restart(cluster):
    s = cluster["server"]

    def restart():
        assert s.stop() == 0, s.log_text()
        s.start()

    def submit_new():
        s.submit(spec(cluster, "after-restart", steps=1))

    r = run("reconnect", cluster, s.admin_token,
            steps=[("WAITING restart", restart), ("WAITING job", submit_new)], timeout=480)
    assert r["sawReconnecting"] and r["liveAgain"] and r["newJobShown"]


def test_auth_none_server_needs_no_sign_in(cluster):
    pg = cluster["pg"]
    db = pg.create_database()
    s = harness.Server(database_url=pg.url(db), auth="none").start()
    try:
        r = run("auth_none", {"server": s}, None)
        assert r["signInShown"] is False and r["overview"]
    finally:
        assert s.stop() == 0
        pg.drop_database(db)


def test_overview_shows_the_servers_usage_not_one_derived_from_job_specs(cluster):
    # An elastic job asks for up to 8 one-CPU workers on a 4-CPU agent: it runs with the workers
    # that fit, so a sum over specs (8 CPUs) and the server's figure (what is held) differ.
    s = cluster["server"]
    job = s.submit({"name": "elastic-usage", "entrypoint": ["sleep", "300"], "backend": "none",
                    "scaling_config": {"num_workers": {"min": 1, "max": 8},
                                       "resources_per_worker": {"CPU": 1}}})["id"]
    s.wait_job(job, {"RUNNING"})

    def server_usage():
        nodes = [n for n in s.request("GET", "/api/v1/nodes").json["nodes"]
                 if n["status"] == "ALIVE"]
        used = sum(n["allocated"]["cpu"] for n in nodes)
        total = sum(n["resources"]["CPU"] for n in nodes)
        return f"{used:g} / {total:g}", used

    want, used = server_usage()
    assert 1 <= used < 8, want
    try:
        r = run("overview_usage", cluster, s.admin_token, extra={"cpu": want})
        assert r["cpu"] == want == server_usage()[0], r
        assert r["gpu"] == "0 / 0", r
    finally:
        s.request("POST", f"/api/v1/jobs/{job}/stop", {})
        s.wait_job(job, {"STOPPED"})
