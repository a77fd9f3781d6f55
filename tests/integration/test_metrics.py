"""Reports -> metrics API, against a real server and PostgreSQL.

Two ways in:
  * the server side alone: the test speaks the agent protocol itself over a real websocket
    (wsclient.py) - registers a node, is sent the launch of a job, reports for its workers and
    checks the acks, the stored rows and GET /api/v1/jobs/{id}/metrics;
  * end to end: a real trainyard-agent runs a Python worker that calls trainyard.report().
"""
import datetime
import itertools
import json
import os
import subprocess
import textwrap
import time

import pytest

import harness
from wsclient import WebSocket

PY = "/usr/bin/python3"
# Long enough that a fake node with no heartbeat thread is not marked LOST mid-test.
SERVER_ARGS = ("--heartbeat-timeout-s", "120")

NODE_NUMBERS = itertools.count(1)

T0 = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def ts(ms):
    """RFC 3339 time `ms` milliseconds after T0, as the agent writes it."""
    t = T0 + datetime.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def db_name(server):
    return server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]


class FakeAgent:
    """A node that speaks docs/agent-protocol.md over a raw websocket."""

    def __init__(self, server, node_id="node-a", cpus=4):
        self.server = server
        self.node_id = node_id
        self.cpus = cpus
        self.seq = 0
        self.ws = None
        self.connect()

    def connect(self, workers=()):
        self.ws = WebSocket(self.server.ws_url + "/agent")
        token_file = os.path.join(self.server.data_dir, "cluster.token")
        token = open(token_file).read().strip() if os.path.exists(token_file) else None
        self.ws.send_json({"type": "register", "token": token, "workers": list(workers),
                           "credential": getattr(self, "credential", None),
                           "node": {"id": self.node_id, "hostname": self.node_id,
                                    "address": "127.0.0.1",
                                    "resources": {"CPU": self.cpus, "memory_mb": 8192, "GPU": []},
                                    "gpu_type": None, "labels": {}, "version": "test",
                                    "port_range": [29500, 29999]}})
        reply = self.ws.wait_for(lambda m: m["type"] in ("registered", "error"))
        assert reply["type"] == "registered", reply
        self.credential = reply.get("credential") or getattr(self, "credential", None)
        return self

    def send_event(self, msg):
        """Sends an event with the next seq; returns the seq."""
        self.seq += 1
        self.ws.send_json(dict(msg, seq=self.seq))
        return self.seq

    def wait_ack(self, seq, timeout=10):
        return self.ws.wait_for(lambda m: m["type"] == "ack" and m["seq"] == seq, timeout)

    def report_msg(self, job, rank, k, metrics, step=None, attempt=1, ms=None,
                   checkpoint_dir=None):
        return {"type": "report", "job_id": str(job), "attempt": attempt, "rank": rank,
                "report_seq": k, "metrics": metrics, "step": step,
                "time": ts(ms if ms is not None else 1000 * k + rank),
                "checkpoint_dir": checkpoint_dir}

    def report(self, job, rank, k, metrics, **kw):
        """Sends a report and waits for its ack."""
        seq = self.send_event(self.report_msg(job, rank, k, metrics, **kw))
        self.wait_ack(seq)
        return seq

    def wait_launch(self, job, timeout=20):
        return self.ws.wait_for(lambda m: m["type"] == "launch" and str(m["job_id"]) == str(job),
                                timeout)

    def start_workers(self, launch):
        for w in launch["workers"]:
            seq = self.send_event({"type": "worker_started", "job_id": str(launch["job_id"]),
                                   "attempt": launch["attempt"], "rank": w["rank"],
                                   "pid": 1000 + w["rank"]})
            self.wait_ack(seq)

    def close(self):
        if self.ws:
            self.ws.close()


@pytest.fixture(scope="module")
def srv(module_server_factory):
    """One server for the file's tests: each makes jobs of its own (conftest.py)."""
    return module_server_factory(extra_args=SERVER_ARGS)


@pytest.fixture
def sql(pg, srv):
    """Runs a query on the test server's database (a separate session) and returns its text."""
    return lambda text: pg.psql(text, db=db_name(srv))


@pytest.fixture
def node(srv):
    # A node of its own per test: the shared server still holds the earlier tests' nodes.
    a = FakeAgent(srv, node_id=f"node-{next(NODE_NUMBERS)}")
    yield a
    a.close()


def running_job(server, node, num_workers=2):
    """Submits a job, receives its launch on `node`, reports its workers started."""
    job = server.submit({"name": "metrics", "entrypoint": ["true"],
                         "scaling_config": {"num_workers": num_workers}})
    launch = node.wait_launch(job["id"])
    assert launch["attempt"] == 1
    node.start_workers(launch)
    server.wait_job(job["id"], {"RUNNING"})
    return job["id"]


def metrics(server, job, query=""):
    r = server.request("GET", f"/api/v1/jobs/{job}/metrics{query}")
    assert r.status == 200, r
    return r.json["metrics"]


def series(points, name, rank=0):
    return [p for p in points if p["name"] == name and p["rank"] == rank]


# --- reports committed, then acked, then served ------------------------------------------------

def test_reports_of_every_rank_are_served_ordered_by_name_rank_time(srv, node):
    job = running_job(srv, node)
    for k in range(1, 6):
        node.report(job, 0, k, {"loss": 1.0 / k, "accuracy": k / 10}, step=10 * k)
        node.report(job, 1, k, {"loss": 2.0 / k}, step=10 * k)
    points = metrics(srv, job)
    assert [(p["name"], p["rank"]) for p in points] == \
        [("accuracy", 0)] * 5 + [("loss", 0)] * 5 + [("loss", 1)] * 5
    assert [p["value"] for p in series(points, "loss", 0)] == [1.0 / k for k in range(1, 6)]
    assert [p["value"] for p in series(points, "loss", 1)] == [2.0 / k for k in range(1, 6)]
    assert [p["step"] for p in series(points, "accuracy")] == [10, 20, 30, 40, 50]
    first = series(points, "accuracy")[0]
    assert first == {"name": "accuracy", "rank": 0, "attempt": 1, "step": 10, "value": 0.1,
                     "time": "2030-01-02T03:04:06.000000Z"}
    times = [p["time"] for p in series(points, "loss", 1)]
    assert times == sorted(times)


def test_ack_comes_only_after_the_report_is_committed(srv, node, sql):
    job = running_job(srv, node)
    for k in range(1, 4):
        node.report(job, 0, k, {"loss": float(k)})
        # The ack was read: the rows must already be visible to any other session.
        assert [p["value"] for p in metrics(srv, job, "?name=loss")][-1] == float(k)
        n = int(sql(f"SELECT count(*) FROM reports WHERE job_id = {job}"))
        assert n == k


def test_a_flood_then_the_exit_is_stored_and_acked_in_the_agent_order(srv, node, sql):
    """Batches of reports are stored while the server reads the next messages (a batch's
    statement in flight, control_report.c): still every ack comes after its report committed and
    in the order of the agent's events, and the worker's exit, sent right after its last reports
    without waiting for their acks, is applied after them: the job ends with every report stored
    and its last one as its result."""
    job = running_job(srv, node, num_workers=1)
    n = 600
    first = node.seq + 1
    for k in range(1, n + 1):
        node.send_event(node.report_msg(job, 0, k, {"loss": 1 / k, "k": k}, step=k))
    exit_seq = node.send_event({"type": "worker_exited", "job_id": str(job), "attempt": 1,
                                "rank": 0, "exit_code": 0, "signal": None, "error": None})
    acks = []
    while not acks or acks[-1] != exit_seq:
        m = node.ws.recv_json(timeout=30)
        if m.get("type") == "ack":
            acks.append(m["seq"])
    assert acks == list(range(first, exit_seq + 1))
    assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    assert sql(f"SELECT count(*) FROM reports WHERE job_id = {job}") == str(n)
    assert srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"] == \
        {"loss": 1 / n, "k": n, "step": n}


def test_result_metrics_hold_rank_zero_last_report_with_step(srv, node):
    job = running_job(srv, node)
    node.report(job, 0, 1, {"loss": 0.9, "accuracy": 0.1}, step=100)
    node.report(job, 1, 1, {"loss": 7.0, "accuracy": 0.7}, step=100)
    node.report(job, 0, 2, {"loss": 0.5, "accuracy": 0.6}, step=200)
    node.report(job, 1, 2, {"loss": 8.0}, step=200)
    got = srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"]
    assert got == {"loss": 0.5, "accuracy": 0.6, "step": 200}


def test_result_without_step_has_no_step(srv, node):
    job = running_job(srv, node)
    node.report(job, 0, 1, {"loss": 0.25})
    assert srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"] == {"loss": 0.25}


def test_late_older_report_does_not_replace_the_result(srv, node):
    job = running_job(srv, node)
    node.report(job, 0, 2, {"loss": 0.2}, step=2)
    node.report(job, 0, 1, {"loss": 0.1}, step=1)  # e.g. resent from the spool after a reconnect
    assert srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"] == \
        {"loss": 0.2, "step": 2}
    assert [p["step"] for p in metrics(srv, job)] == [1, 2]


def test_resent_report_is_acked_but_stored_once(srv, node, sql):
    job = running_job(srv, node)
    node.report(job, 0, 1, {"loss": 0.5, "acc": 0.1}, step=1)
    node.report(job, 0, 1, {"loss": 0.5, "acc": 0.1}, step=1)
    # A resend after a reconnect (new connection, new event seq: the agent restarted).
    node.close()
    node.connect(workers=[{"job_id": str(job), "attempt": 1, "rank": r, "pid": 1000 + r,
                           "status": "RUNNING", "exit_code": None, "signal": None}
                          for r in (0, 1)])
    node.report(job, 0, 1, {"loss": 0.5, "acc": 0.1}, step=1)
    assert len(metrics(srv, job)) == 2
    assert int(sql(f"SELECT count(*) FROM metrics WHERE job_id = {job}")) == 2
    assert int(sql(f"SELECT count(*) FROM reports WHERE job_id = {job}")) == 1


@pytest.mark.parametrize("errcode", ["40001", "P0001"])  # retryable, and a hard failure
def test_report_not_committed_is_not_acked_and_is_resent_after_reconnect(srv, node, sql,
                                                                        errcode):
    job = running_job(srv, node)
    sql(f"CREATE OR REPLACE FUNCTION ty_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"RAISE EXCEPTION 'injected' USING ERRCODE = '{errcode}'; END $$; "
        "CREATE TRIGGER ty_test_fail BEFORE INSERT ON reports "
        "FOR EACH ROW EXECUTE FUNCTION ty_test_fail()")
    failed = node.send_event(node.report_msg(job, 0, 1, {"loss": 1.0}))
    # An event right behind it must not be acked either: acks are cumulative, so its ack would
    # tell the agent to forget the report.
    behind = node.send_event({"type": "worker_started", "job_id": str(job), "attempt": 1,
                              "rank": 0, "pid": 1000})
    got = node.ws.expect_closed()
    assert not [m for m in got if m["type"] == "ack"], got
    assert behind > failed
    sql("DROP TRIGGER ty_test_fail ON reports; DROP FUNCTION ty_test_fail()")
    node.connect(workers=[{"job_id": str(job), "attempt": 1, "rank": r, "pid": 1000 + r,
                           "status": "RUNNING", "exit_code": None, "signal": None}
                          for r in (0, 1)])
    node.report(job, 0, 1, {"loss": 1.0})
    assert [p["value"] for p in metrics(srv, job)] == [1.0]


def test_report_with_no_numbers_is_recorded_as_a_report(srv, node, sql):
    job = running_job(srv, node)
    node.report(job, 0, 1, {}, step=5, checkpoint_dir="/var/lib/ty/staging/ck-1")
    assert metrics(srv, job) == []
    row = sql(f"SELECT seq, step, checkpoint_dir, node_id FROM reports WHERE job_id = {job}")
    assert row == f"1|5|/var/lib/ty/staging/ck-1|{node.node_id}"


def test_non_numeric_metric_values_are_stored_and_returned(srv, node, sql):
    job = running_job(srv, node)
    values = {"loss": 0.5, "note": "warming up", "flag": True, "none": None,
              "nested": {"a": 1}, "list": [1], "big": 12345678901234}
    node.report(job, 0, 1, dict(values, **{"": 3}), step=3)  # only the empty name is skipped
    points = metrics(srv, job)
    assert {p["name"]: p["value"] for p in points} == values
    assert srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"] == \
        dict(values, step=3)
    band = srv.request("GET", f"/api/v1/jobs/{job}/metrics?mode=band").json["metrics"]
    note = next(b for b in band if b["name"] == "note")
    assert note["first"] == note["last"] == "warming up" and note["min"] is None, note
    # The SQL view `metrics` stays one row per number.
    assert sql(f"SELECT string_agg(name, ',' ORDER BY name) FROM metrics WHERE job_id = {job}") \
        == "big,loss"


@pytest.mark.parametrize("change", [
    {"metrics": [1, 2]},
    {"metrics": None},
    {"time": "yesterday"},
    {"time": None},
    {"time": "2030-13-02T03:04:05Z"},
    {"job_id": "not-a-job"},
    {"rank": -1},
    {"report_seq": 0},
    {"step": -5},
    {"step": 1.5},
    {"checkpoint_dir": 42},
])
def test_malformed_report_is_acked_and_dropped(srv, node, change):
    job = running_job(srv, node)
    msg = node.report_msg(job, 0, 1, {"loss": 1.0})
    msg.update(change)
    node.wait_ack(node.send_event(msg))
    assert metrics(srv, job) == []
    # The connection goes on: the next report is stored.
    node.report(job, 0, 2, {"loss": 2.0})
    assert [p["value"] for p in metrics(srv, job)] == [2.0]


def test_date_postgresql_refuses_is_acked_and_dropped(srv, node):
    job = running_job(srv, node)
    node.wait_ack(node.send_event(node.report_msg(job, 0, 1, {"loss": 1.0}) |
                                  {"time": "2030-02-30T00:00:00Z"}))
    assert metrics(srv, job) == []
    node.report(job, 0, 2, {"loss": 2.0})
    assert len(metrics(srv, job)) == 1


def test_report_without_seq_is_not_acked(srv, node):
    job = running_job(srv, node)
    node.ws.skipped = []
    node.ws.send_json(node.report_msg(job, 0, 1, {"loss": 1.0}))
    node.report(job, 0, 2, {"loss": 2.0})
    # Everything the server sent before the second report's ack: no ack among it, so nothing
    # answered the report that had no seq.
    assert not [m for m in node.ws.skipped if m["type"] == "ack"], node.ws.skipped
    assert [p["value"] for p in metrics(srv, job)] == [2.0]


def test_report_for_a_worker_the_node_does_not_run_is_dropped(srv, node):
    job = running_job(srv, node)
    node.report(job, 7, 1, {"loss": 1.0})             # no rank 7
    node.report(job, 0, 1, {"loss": 1.0}, attempt=2)  # no attempt 2
    node.report(job + 100, 0, 1, {"loss": 1.0})       # no such job
    other = FakeAgent(srv, node_id=f"node-{next(NODE_NUMBERS)}")
    try:
        other.report(job, 0, 1, {"loss": 1.0})         # rank 0 runs on `node`
    finally:
        other.close()
    assert metrics(srv, job) == []
    assert srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"] is None


def test_unregistered_connection_cannot_report(srv, node):
    job = running_job(srv, node)
    with WebSocket(srv.ws_url + "/agent") as ws:
        ws.send_json(node.report_msg(job, 0, 1, {"loss": 1.0}) | {"seq": 1})
        got = ws.expect_closed()
        assert [m["type"] for m in got] == ["error"]
    assert metrics(srv, job) == []


# --- query: filters, downsampling, errors --------------------------------------------------------

def test_name_rank_and_attempt_filters(srv, node):
    job = running_job(srv, node)
    for k in (1, 2):
        for rank in (0, 1):
            node.report(job, rank, k, {"loss": k + rank / 10, "acc": k, "lr": 0.1}, step=k)
    assert {p["name"] for p in metrics(srv, job, "?name=loss")} == {"loss"}
    assert {p["name"] for p in metrics(srv, job, "?name=loss,lr")} == {"loss", "lr"}
    assert metrics(srv, job, "?name=nope") == []
    only1 = metrics(srv, job, "?rank=1&name=loss")
    assert [(p["rank"], p["value"]) for p in only1] == [(1, 1.1), (1, 2.1)]
    assert len(metrics(srv, job, "?attempt=1")) == 12
    assert metrics(srv, job, "?attempt=2") == []
    assert metrics(srv, job, "?rank=5") == []


def test_each_series_is_downsampled_keeping_first_last_and_spikes(srv, node):
    job = running_job(srv, node)
    n = 60
    for k in range(1, n + 1):
        loss = 100.0 if k == 37 else 1.0 / k
        node.report(job, 0, k, {"loss": loss, "acc": k / n}, step=k)
        node.report(job, 1, k, {"loss": loss}, step=k)
    full = metrics(srv, job)
    assert len(full) == 3 * n  # default max_points 1000: everything
    small = metrics(srv, job, "?max_points=10")
    for name, rank in (("acc", 0), ("loss", 0), ("loss", 1)):
        s = series(small, name, rank)
        assert len(s) == 10, (name, rank, s)
        steps = [p["step"] for p in s]
        assert steps[0] == 1 and steps[-1] == n and steps == sorted(steps)
        if name == "loss":
            assert 37 in steps  # the spike survives
    last = metrics(srv, job, "?max_points=1&name=loss&rank=0")
    assert [(p["step"], p["value"]) for p in last] == [(n, 1.0 / n)]
    two = metrics(srv, job, "?max_points=2&name=acc")
    assert [p["step"] for p in two] == [1, n]


def test_band_mode_gives_first_last_min_max_per_bucket(srv, node):
    job = running_job(srv, node)
    n = 60
    values = [100.0 if k == 37 else (-3.0 if k == 50 else 1.0 / k) for k in range(1, n + 1)]
    for k in range(1, n + 1):
        node.report(job, 0, k, {"loss": values[k - 1]}, step=k)
        node.report(job, 1, k, {"loss": 2.0}, step=k)
    band = metrics(srv, job, "?mode=band&max_points=4&name=loss&rank=0")
    assert len(band) == 4
    for b, bucket in enumerate(band):
        part = values[15 * b:15 * (b + 1)]
        assert bucket["name"] == "loss" and bucket["rank"] == 0 and bucket["attempt"] == 1
        assert bucket["count"] == 15
        assert (bucket["step_first"], bucket["step_last"]) == (15 * b + 1, 15 * b + 15)
        assert (bucket["first"], bucket["last"]) == (part[0], part[-1])
        assert (bucket["min"], bucket["max"]) == (min(part), max(part))
        assert bucket["start"] == ts(1000 * (15 * b + 1)).replace("Z", "000Z")
        assert "superseded" not in bucket
    assert band[2]["max"] == 100.0 and band[3]["min"] == -3.0
    # Every series gets its own buckets; a short series one bucket per point.
    both = metrics(srv, job, "?mode=band&max_points=4")
    assert [(b["rank"], b["count"]) for b in both] == [(0, 15)] * 4 + [(1, 15)] * 4
    short = metrics(srv, job, "?mode=band&max_points=100&rank=1")
    assert len(short) == n and all(b["count"] == 1 and b["min"] == b["max"] == 2.0 for b in short)
    assert metrics(srv, job, "?mode=points&max_points=2&name=loss&rank=0")[0]["value"] == 1.0


def test_points_of_a_superseded_attempt_stay_queryable_and_are_marked(srv, node, sql):
    job = running_job(srv, node, num_workers=1)
    node.report(job, 0, 1, {"loss": 1.0}, step=1, ms=1000)
    node.report(job, 0, 2, {"loss": 0.9}, step=2, ms=2000)
    assert ["superseded" in p for p in metrics(srv, job)] == [False, False]
    # Restarts are not implemented yet (docs/lifecycle.md): the job's second attempt is made in
    # the database, as a restart will make it, with one point of its own.
    sql(f"UPDATE jobs SET attempt = 2 WHERE id = {job}; "
        "INSERT INTO reports (job_id, attempt, rank, seq, step, reported_at, metrics) "
        f"VALUES ({job}, 2, 0, 1, 1, '{ts(3000)}', '{{\"loss\": 0.8}}')")
    points = metrics(srv, job)
    assert [(p["attempt"], p["value"], p.get("superseded", False)) for p in points] == \
        [(1, 1.0, True), (1, 0.9, True), (2, 0.8, False)]
    assert [p["superseded"] for p in metrics(srv, job, "?attempt=1")] == [True, True]
    assert ["superseded" in p for p in metrics(srv, job, "?attempt=2")] == [False]
    band = metrics(srv, job, "?mode=band&max_points=2")
    assert [(b["attempt"], b["count"], b.get("superseded", False)) for b in band] == \
        [(1, 1, True), (2, 2, False)]


@pytest.mark.parametrize("query,field", [
    ("?max_points=0", "max_points"),
    ("?max_points=10001", "max_points"),
    ("?max_points=ten", "max_points"),
    ("?rank=-1", "rank"),
    ("?rank=x", "rank"),
    ("?attempt=0", "attempt"),
    ("?attempt=1.5", "attempt"),
    ("?name=", "name"),
    ("?name=loss,,acc", "name"),
    ("?name=" + "x" * 300, "name"),
    ("?mode=minmax", "mode"),
])
def test_bad_parameter_is_400_naming_it(srv, query, field):
    job = srv.submit({"entrypoint": ["true"]})["id"]
    r = srv.request("GET", f"/api/v1/jobs/{job}/metrics{query}")
    assert r.status == 400, r
    assert r.headers["Content-Type"] == "application/problem+json"
    assert r.json["code"] == "invalid-parameter"
    assert [e["field"] for e in r.json["errors"]] == [field]


def test_metrics_of_unknown_job_is_404(srv):
    r = srv.request("GET", "/api/v1/jobs/424242/metrics")
    assert r.status == 404 and r.json["code"] == "job-not-found"
    assert srv.request("GET", "/api/v1/jobs/abc/metrics").status == 404


def test_job_without_reports_has_empty_metrics(srv):
    job = srv.submit({"entrypoint": ["true"]})["id"]
    assert metrics(srv, job) == []


def test_viewer_may_read_metrics_anonymous_may_not(srv):
    job = srv.submit({"entrypoint": ["true"]})["id"]
    viewer = srv.create_token("watcher", "viewer")
    assert srv.request("GET", f"/api/v1/jobs/{job}/metrics", token=viewer).status == 200
    assert srv.request("GET", f"/api/v1/jobs/{job}/metrics", token=None).status == 401


def test_metrics_are_deleted_with_their_job(srv, node, sql):
    job = running_job(srv, node, num_workers=1)
    node.report(job, 0, 1, {"loss": 1.0})
    seq = node.send_event({"type": "worker_exited", "job_id": str(job), "attempt": 1, "rank": 0,
                           "exit_code": 0, "signal": None, "error": None})
    node.wait_ack(seq)
    srv.wait_job(job, {"SUCCEEDED"})
    assert srv.request("DELETE", f"/api/v1/jobs/{job}").status in (200, 204)
    assert int(sql(f"SELECT count(*) FROM metrics WHERE job_id = {job}")) == 0
    assert int(sql(f"SELECT count(*) FROM reports WHERE job_id = {job}")) == 0


# --- end to end: a real agent, a Python worker calling trainyard.report() ------------------------

WORKER = textwrap.dedent("""
    import trainyard
    ctx = trainyard.get_context()
    rank = ctx.get_world_rank()
    for step in range(1, 6):
        trainyard.report({"loss": 1.0 / step + rank, "accuracy": step / 10, "step": step * 10})
""")


def test_python_worker_reports_reach_the_metrics_api(server, agent_factory):
    srv = server
    agent_factory(cpus=2)
    work = harness.make_tmpdir("ty-metrics-")
    with open(os.path.join(work, "train.py"), "w") as f:
        f.write(WORKER)
    job = srv.submit({"name": "report-e2e", "entrypoint": [PY, "train.py"], "working_dir": work,
                      "scaling_config": {"num_workers": 2}})["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    # Reports reach the server asynchronously (the agent's spool): wait for all 20 points.
    deadline = time.time() + 30
    points = []
    while time.time() < deadline:
        points = metrics(srv, job)
        if len(points) == 20:
            break
        time.sleep(0.1)
    assert len(points) == 20, points
    for rank in (0, 1):
        loss = series(points, "loss", rank)
        assert [p["step"] for p in loss] == [10, 20, 30, 40, 50]
        assert [p["value"] for p in loss] == [1.0 / s + rank for s in range(1, 6)]
        assert all(p["attempt"] == 1 for p in loss)
    assert [p["value"] for p in series(points, "accuracy", 1)] == [0.1, 0.2, 0.3, 0.4, 0.5]
    down = metrics(srv, job, "?name=loss&rank=1&max_points=3")
    assert [p["step"] for p in down][0::2] == [10, 50] and len(down) == 3
    deadline = time.time() + 30
    result = None
    while time.time() < deadline:
        result = srv.request("GET", f"/api/v1/jobs/{job}").json["result"]["metrics"]
        if result and result.get("step") == 50:
            break
        time.sleep(0.1)
    assert result == {"loss": 0.2, "accuracy": 0.5, "step": 50}


def blocks_stored(sql, job, block_next):
    """Waits for the leader's maintenance (ty_report_blocks_fill, every control tick) to have
    summed up every series of `job` up to `block_next`, the block of its newest report."""
    harness.wait_for(lambda: sql(f"SELECT min(block_next) FROM report_series "
                                 f"WHERE job_id = {job}") == str(block_next),
                     30, "the maintenance's blocks")


def test_band_of_a_long_series_is_read_from_blocks_and_stays_true(srv, node, sql):
    """Issue 26: reports are summed up per 16 (report_blocks, migration 0046) whatever writes them
    (here SQL: the leader's maintenance finds the series, ty_reports_added) and in whatever order
    (two statements, the later seqs first: block 31 was stored with the first one's part and is
    summed up again once the second brings the rest; reads meanwhile take it from the reports);
    a band with 2 or more blocks per bucket is read from the blocks: buckets of whole blocks that
    keep every point's min and max (the spikes), the first and the last; a zoom's band is cut from
    the points, exactly."""
    job = running_job(srv, node, num_workers=1)
    n = 2000
    value = {s: 100.0 if s == 777 else (-5.0 if s == 1500 else 1 / s) for s in range(1, n + 1)}
    insert = ("INSERT INTO reports (job_id, attempt, rank, seq, step, reported_at, metrics) "
              f"SELECT {job}, 1, 0, s, 10 * s, '{ts(0)}'::timestamptz + s * interval '1 ms', "
              "jsonb_build_object('loss', CASE s WHEN 777 THEN 100 WHEN 1500 THEN -5 "
              "ELSE 1.0 / s END, 'note', 'n' || s) FROM generate_series({a}, {b}) s")
    blocks = (f"SELECT count(*), sum(count), min(seq_first), max(seq_last) FROM report_blocks "
              f"WHERE job_id = {job} AND name = 'loss'")
    sql(insert.format(a=500, b=n))
    blocks_stored(sql, job, n >> 4)
    assert sql(blocks) == f"{(n >> 4) - (500 >> 4)}|{(n & ~15) - 500}|500|{(n & ~15) - 1}"
    sql(insert.format(a=1, b=499))
    assert sum(b["count"] for b in metrics(srv, job, "?mode=band&max_points=10&name=loss")) == n
    blocks_stored(sql, job, n >> 4)
    # every complete block (seq 1..1999); the last one (seq 2000..) stays read from the reports
    assert sql(blocks) == f"{n >> 4}|{(n & ~15) - 1}|1|{(n & ~15) - 1}"
    assert sql(f"SELECT count FROM report_blocks WHERE job_id = {job} AND name = 'loss' "
               f"AND block = {500 >> 4}") == "16"
    band = metrics(srv, job, "?mode=band&max_points=10&name=loss")
    assert len(band) == 10 and sum(b["count"] for b in band) == n
    assert all(abs(b["count"] - n // 10) <= 16 for b in band)
    assert (band[0]["step_first"], band[0]["first"], band[0]["start"]) == \
        (10, 1, ts(1).replace("Z", "000Z"))
    assert (band[-1]["step_last"], band[-1]["last"]) == (10 * n, 1 / n)
    for b, c in zip(band, band[1:]):
        assert c["step_first"] == b["step_last"] + 10
    for b in band:
        part = [value[s] for s in range(b["step_first"] // 10, b["step_last"] // 10 + 1)]
        assert (b["min"], b["max"]) == (pytest.approx(min(part)), pytest.approx(max(part)))
    assert max(b["max"] for b in band) == 100 and min(b["min"] for b in band) == -5
    note = metrics(srv, job, "?mode=band&max_points=10&name=note")
    assert (note[0]["first"], note[-1]["last"], note[-1]["min"]) == ("n1", f"n{n}", None)
    zoom = metrics(srv, job, f"?mode=band&max_points=10&name=loss&step_min=10&step_max={10 * n}")
    assert [b["count"] for b in zoom] == [n // 10] * 10
    assert (max(b["max"] for b in zoom), min(b["min"] for b in zoom)) == (100, -5)



def test_values_are_stored_as_the_worker_wrote_them(srv, node, sql):
    """Issue 27: a report's values reach PostgreSQL as the message wrote them (not parsed and
    written again by the server), so a number keeps its digits (1.50, 0.1 not
    0.10000000000000001) and the API reads them back; a report with a metric left out (a name
    too long) is written from the values kept, and is stored too."""
    job = running_job(srv, node, num_workers=1)
    node.seq += 1
    node.ws.send_text('{"type":"report","seq":%d,"job_id":"%s","attempt":1,"rank":0,'
                      '"report_seq":1,"step":1,"time":"%s","metrics":{ "a" : 1.50,"b":0.1,'
                      '"c":"x y","d":[1, 2.0],"a":2.50}}' % (node.seq, job, ts(1000)))
    node.wait_ack(node.seq)
    node.report(job, 0, 2, {"a": 1.0, "n" * 300: 1.0}, step=2)
    assert sql(f"SELECT metrics::text FROM reports WHERE job_id = {job} ORDER BY seq") == \
        '{"a": 2.50, "b": 0.1, "c": "x y", "d": [1, 2.0]}\n{"a": 1.0}'
    assert [(p["step"], p["value"]) for p in metrics(srv, job, "?name=a")] == [(1, 2.5), (2, 1)]


def test_report_names_are_those_of_known_workers_reports(srv, node, sql):
    """Issue 27: the server stores the names of a batch's reports itself (those it does not know
    stored; the reports' trigger leaves them to it): a name first carried by a later report is
    stored too, and a node that reports for a job it does not run adds no name to that job, even
    where its report and a known worker's carrying the same name come in one batch."""
    job = running_job(srv, node, num_workers=1)
    names = f"SELECT string_agg(name, ',' ORDER BY name) FROM report_names WHERE job_id = {job}"
    node.report(job, 0, 1, {"loss": 1.0})
    assert sql(names) == "loss"
    node.report(job, 0, 2, {"loss": 0.5, "acc": 0.25})
    assert sql(names) == "acc,loss"
    other = FakeAgent(srv, node_id=f"node-{next(NODE_NUMBERS)}")
    try:
        theirs = other.send_event(other.report_msg(job, 0, 3, {"shared": 1, "intruder": 1}))
        ours = node.send_event(node.report_msg(job, 0, 3, {"shared": 2, "loss": 0.1}))
        other.wait_ack(theirs)
        node.wait_ack(ours)
    finally:
        other.close()
    assert sql(names) == "acc,loss,shared"
    assert [p["value"] for p in metrics(srv, job, "?name=shared")] == [2]


def test_a_deleted_jobs_blocks_and_stream_go_with_it(srv, node, sql):
    """Issue 27 (migrations 0057, 0059): neither report_blocks nor job_stream has a foreign key to
    jobs (the maintenance stores ~100 rows per block, a batch one stream row per report, and each
    row checked it); deleting a job deletes its blocks and its stream by triggers, as the keys'
    ON DELETE CASCADE did, and the other jobs' stay."""
    job, other = running_job(srv, node, num_workers=1), running_job(srv, node, num_workers=1)
    for j in (job, other):
        sql("INSERT INTO reports (job_id, attempt, rank, seq, reported_at, metrics) "
            f"SELECT {j}, 1, 0, s, now(), jsonb_build_object('loss', s, 'acc', -s) "
            "FROM generate_series(1, 100) s")
        blocks_stored(sql, j, 100 >> 4)
    count = "SELECT count(*) FROM report_blocks WHERE job_id = {}"
    assert sql(count.format(job)) == sql(count.format(other)) == str(2 * (100 >> 4))
    seq = node.send_event({"type": "worker_exited", "job_id": str(job), "attempt": 1, "rank": 0,
                           "exit_code": 0, "signal": None, "error": None})
    node.wait_ack(seq)
    srv.wait_job(job, {"SUCCEEDED"})
    node.report(job, 0, 101, {"loss": 0.5})
    node.report(other, 0, 101, {"loss": 0.5})
    stream = "SELECT count(*) FROM job_stream WHERE job_id = {}"
    streamed = sql(stream.format(other))
    assert int(sql(stream.format(job))) > 0 and int(streamed) > 0
    assert srv.request("DELETE", f"/api/v1/jobs/{job}").status == 204
    assert sql(count.format(job)) == "0"
    assert sql(count.format(other)) == str(2 * (100 >> 4))
    assert sql(stream.format(job)) == "0"
    assert sql(stream.format(other)) == streamed


def test_band_read_before_the_blocks_are_stored_equals_the_band_after(srv, node, sql, pg):
    """Issue 27: report_blocks is left to the leader's maintenance (migrations 0047, 0050). A band
    read before it ran (the series' row held here, so the maintenance skips it) sums the blocks up
    from the reports, and is the same once the maintenance stored them. A report that comes after
    its block was stored (seq 40, held back) lowers the series' block_next to its block: a read
    then takes the stored blocks below it only (those from there on are stale until the
    maintenance sums them up again) and the rest from the reports; then the stored blocks are
    what the reports say."""
    job = running_job(srv, node, num_workers=1)
    n, late = 200, 40
    value = {k: 100.0 if k == 77 else 1 / k for k in range(1, n + 1)}
    node.report(job, 0, 1, {"loss": value[1], "note": "n1"}, step=10)
    query = "?mode=band&max_points=4"

    def held(send):
        """Runs send() and reads a band while the series' row is held (FOR KEY SHARE: the
        reports' trigger still updates it, the maintenance's FOR UPDATE waits for it, its blocks
        not committed); returns the block_next read then, and the band."""
        hold = subprocess.Popen(["psql", "-h", pg.sockdir, "-U", "trainyard", "-d",
                                 db_name(srv), "-XAtq"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        try:
            hold.stdin.write(f"BEGIN; SELECT block_next FROM report_series WHERE job_id = {job} "
                             "FOR KEY SHARE;\n")
            hold.stdin.flush()
            block_next = hold.stdout.readline().strip()
            send()
            band = metrics(srv, job, query)
            hold.stdin.write("COMMIT;\n")
        finally:
            hold.stdin.close()
            hold.wait()
        return block_next, band

    def flood():
        for k in range(2, n + 1):
            if k != late:
                seq = node.send_event(node.report_msg(job, 0, k, {"loss": value[k],
                                                                  "note": f"n{k}"}, step=10 * k))
        node.wait_ack(seq)
        assert sql(f"SELECT count(*) FROM report_blocks WHERE job_id = {job}") == "0"

    block_next, before = held(flood)
    assert block_next == "0"
    assert sum(b["count"] for b in before if b["name"] == "loss") == n - 1
    assert max(b["max"] for b in before if b["name"] == "loss") == 100
    # blocks 0..11 are complete (seq 1..191); block 12 (seq 192..200) stays read from the reports
    blocks_stored(sql, job, n >> 4)
    stored = f"SELECT count(*) FROM report_blocks WHERE job_id = {job} AND name = 'loss'"
    assert sql(stored) == str(n >> 4)
    assert metrics(srv, job, query) == before

    def late_report():
        node.report(job, 0, late, {"loss": value[late], "note": f"n{late}"}, step=10 * late)
        assert sql(f"SELECT block_next FROM report_series WHERE job_id = {job}") == \
            str(late >> 4)

    block_next, band = held(late_report)
    assert block_next == str(n >> 4)
    assert sum(b["count"] for b in band if b["name"] == "loss") == n
    blocks_stored(sql, job, n >> 4)
    assert sql(f"SELECT count FROM report_blocks WHERE job_id = {job} AND name = 'loss' "
               f"AND block = {late >> 4}") == "16"
    assert sql(f"(SELECT * FROM report_blocks WHERE job_id = {job} EXCEPT "
               f" SELECT * FROM ty_report_blocks_of({job}, 1, 0, 0, {(n >> 4) - 1})) UNION ALL "
               f"(SELECT * FROM ty_report_blocks_of({job}, 1, 0, 0, {(n >> 4) - 1}) EXCEPT "
               f" SELECT * FROM report_blocks WHERE job_id = {job})") == ""
    assert metrics(srv, job, query) == band
    assert [(b["first"], b["last"]) for b in band if b["name"] == "note"][0][0] == "n1"


BLOCK_COLUMNS = ("name, block, count, seq_first, seq_last, start_at, end_at, step_first, "
                 "step_last, v_first, v_last, v_min, v_max")


def maintenance_held(pg, srv):
    """A psql session holding the lock every call of the leader's maintenance takes first
    (advisory (12, 0), ty_report_blocks_fill): it stores no block until the session ends."""
    hold = subprocess.Popen(["psql", "-h", pg.sockdir, "-U", "trainyard", "-d", db_name(srv),
                             "-XAtq"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    hold.stdin.write("SELECT pg_advisory_lock(12, 0);\n")
    hold.stdin.flush()
    hold.stdout.readline()
    return hold


def test_blocks_are_summed_up_by_the_server_as_it_stores_the_reports(srv, node, sql, pg):
    """Issue 27: the server sums up report_blocks itself as it stores a series' reports (the
    maintenance summed every report up again from PostgreSQL: more than storing it): with the
    maintenance held, the complete blocks of a series the server saw whole are stored with their
    reports, and are exactly what the maintenance sums up from the stored reports (numbers of
    every kind: integers past 2^53, -0.0, 1e300, names carried by some reports only, steps left
    out). A block the server did not see whole or could not sum up (a report sent again out of
    order, a value that is not a number) is left to the maintenance, which stores it once let
    run: again exactly what the reports hold."""
    job = running_job(srv, node, num_workers=2)
    n = 40

    def values(k):
        v = {"loss": 1 / k, "i": 3 * k, "big": 1e300 * k, "tiny": 1e-7 / k,
             "z": -0.0 if k % 2 else 0, "wide": 2 ** 60 + k}
        if k % 3 == 0:
            v["some"] = -k / 7
        return v

    hold = maintenance_held(pg, srv)
    try:
        for k in range(1, n + 1):
            step = 10 * k if k % 5 else None
            node.send_event(node.report_msg(job, 0, k, values(k), step=step))
            rank1 = dict(values(k), note="x") if k == 20 else values(k)
            node.send_event(node.report_msg(job, 1, k, rank1, step=step))
            if k == 4:  # rank 1's report 3 again, after 4: its block is not summed up here
                node.send_event(node.report_msg(job, 1, 3, values(3), step=30))
        node.wait_ack(node.seq)
        block_next = ("SELECT string_agg(block_next::text, ',' ORDER BY rank) FROM report_series "
                      f"WHERE job_id = {job}")
        assert sql(block_next) == f"{n >> 4},0"
        assert sql(f"SELECT count(*) FROM report_blocks WHERE job_id = {job} AND rank = 1") == "0"
    finally:
        hold.stdin.close()
        hold.wait()
    blocks_stored(sql, job, n >> 4)
    for rank in (0, 1):
        stored = sql(f"SELECT {BLOCK_COLUMNS} FROM report_blocks WHERE job_id = {job} "
                     f"AND rank = {rank} ORDER BY name, block")
        summed = sql(f"SELECT {BLOCK_COLUMNS} FROM ty_report_blocks_of({job}, 1, {rank}, 0, "
                     f"{(n >> 4) - 1}) ORDER BY name, block")
        assert stored == summed
        assert len(stored.splitlines()) == 7 * (n >> 4) + (1 if rank else 0)


def test_a_block_with_a_gap_is_summed_up_by_the_server_unless_another_writer_filled_it(
        srv, node, sql, pg):
    """Issue 27: a block whose seqs the server saw only in part (a gap: report 40 never sent) is
    still the server's to store, once it checks that the stored reports hold no other report of
    the block; one where another writer (SQL) stored the missing report meanwhile is left to the
    maintenance. A block of every seq needs no such check. Each, once the maintenance has run,
    is exactly what the stored reports hold."""
    job = running_job(srv, node, num_workers=1)
    hold = maintenance_held(pg, srv)
    try:
        for k in range(1, 16):  # block 0 (seqs 1..15) without 7, which SQL then stores
            if k != 7:
                node.send_event(node.report_msg(job, 0, k, {"loss": 1 / k}))
        node.wait_ack(node.seq)
        node_id = sql(f"SELECT node_id FROM workers WHERE job_id = {job}")
        sql(f"INSERT INTO reports (job_id, attempt, rank, seq, node_id, reported_at, metrics) "
            f"VALUES ({job}, 1, 0, 7, '{node_id}', now(), '{{\"loss\": 7}}')")
        for k in range(16, 50):  # block 1 whole, block 2 (32..47) without 40
            if k != 40:
                node.send_event(node.report_msg(job, 0, k, {"loss": 1 / k}))
        node.wait_ack(node.seq)
        assert sql(f"SELECT string_agg(block::text || ':' || count, ',' ORDER BY block) "
                   f"FROM report_blocks WHERE job_id = {job}") == "1:16,2:15"
    finally:
        hold.stdin.close()
        hold.wait()
    blocks_stored(sql, job, 3)
    assert sql(f"(SELECT * FROM report_blocks WHERE job_id = {job} EXCEPT "
               f" SELECT * FROM ty_report_blocks_of({job}, 1, 0, 0, 2)) UNION ALL "
               f"(SELECT * FROM ty_report_blocks_of({job}, 1, 0, 0, 2) EXCEPT "
               f" SELECT * FROM report_blocks WHERE job_id = {job})") == ""
    assert sql(f"SELECT count FROM report_blocks WHERE job_id = {job} AND block = 0") == "15"


def test_two_nodes_of_one_job_flood_it_at_once(server_factory, pg):
    """Issue 27: each agent connection's reports go by one of two lanes, batches that two
    PostgreSQL backends store at once (each agent's still in its order). A job on two nodes whose
    agents fall in both lanes, flooded by both at once: every report is stored once and acked, the
    job's stream is numbered without a gap or a repeat, its report bytes count each report once,
    and its blocks are what its reports hold."""
    server = server_factory(extra_args=SERVER_ARGS)
    sql = lambda text: pg.psql(text, db=db_name(server))  # noqa: E731
    a, b = FakeAgent(server, "node-x", cpus=1), FakeAgent(server, "node-y", cpus=1)
    n = 200
    try:
        job = server.submit({"name": "two", "entrypoint": ["true"],
                             "scaling_config": {"num_workers": 2}})["id"]
        launches = [(node, node.wait_launch(job)) for node in (a, b)]
        for node, launch in launches:
            node.start_workers(launch)
        server.wait_job(job, {"RUNNING"})
        size = 0
        for k in range(1, n + 1):
            for node, launch in launches:
                values = {"loss": 1 / k, "acc": k / n}
                size += len(json.dumps(values, separators=(",", ":"))) + 64
                node.send_event(node.report_msg(job, launch["workers"][0]["rank"], k, values,
                                                step=k))
        a.wait_ack(a.seq, 60)
        b.wait_ack(b.seq, 60)
    finally:
        a.close()
        b.close()
    assert sql(f"SELECT count(*) FROM reports WHERE job_id = {job}") == str(2 * n)
    assert sql(f"SELECT count(*) FROM job_stream WHERE job_id = {job} AND kind = 'report'") == \
        str(2 * n)
    total = sql(f"SELECT count(*) FROM job_stream WHERE job_id = {job}")
    assert sql(f"SELECT count(DISTINCT seq), max(seq) FROM job_stream WHERE job_id = {job}") == \
        f"{total}|{total}"
    assert sql(f"SELECT report_bytes FROM jobs WHERE id = {job}") == str(size)
    blocks_stored(sql, job, n >> 4)
    for rank in (0, 1):
        stored = sql(f"SELECT {BLOCK_COLUMNS} FROM report_blocks WHERE job_id = {job} "
                     f"AND rank = {rank} ORDER BY name, block")
        assert stored and stored == sql(f"SELECT {BLOCK_COLUMNS} FROM ty_report_blocks_of("
                                        f"{job}, 1, {rank}, 0, {(n >> 4) - 1}) "
                                        "ORDER BY name, block")
