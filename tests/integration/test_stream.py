"""The live stream (/stream on the websocket port, docs/streams.md) against a real server, a real
PostgreSQL and real agents: ordering, resume without gaps or duplicates across reconnects, slow
subscribers dropped while fast ones keep up, the cluster stream, authentication, isolation."""
import subprocess
import time

import pytest

from wsclient import Closed, WebSocket

PROTOCOL = "trainyard-stream.v1"


def db_name(server):
    return server.args[server.args.index("--database-url") + 1].split("dbname=")[1].split()[0]


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs."""
    return module_server_factory()


@pytest.fixture
def sql(pg, server):
    """Runs a statement on the test server's database (a session of its own), as another server
    of an HA group would write: with a NOTIFY ty_stream at its commit (a server wakes its own
    stream thread after its own commits and tells the others so; docs/streams.md)."""
    return lambda text: pg.psql(text + "; NOTIFY ty_stream", db=db_name(server))


class Sub:
    """A /stream client."""

    def __init__(self, server, token="admin", path="/stream", rcvbuf=None, auth=True):
        self.ws = WebSocket(server.ws_url + path, subprotocol=PROTOCOL, rcvbuf=rcvbuf)
        self.seqs = {}  # job (0: the cluster) -> seqs received, in order
        self.events = []
        self.pending = []  # events of a batched frame not returned by next() yet
        self.frames = {"event": 0, "events": 0}  # frames received of each kind
        if auth:
            tok = server.admin_token if token == "admin" else token
            self.ws.send_json({"type": "auth", "token": tok})
            self.welcome = self.next()
            assert self.welcome["type"] == "welcome", self.welcome

    def next(self, timeout=30):
        """The next message; the events of a batched frame are returned one by one."""
        if self.pending:
            msg = self.pending.pop(0)
        else:
            msg = self.ws.recv_json(timeout=timeout)
            if msg["type"] in self.frames:
                self.frames[msg["type"]] += 1
            if msg["type"] == "events":
                assert len(msg["events"]) > 1, msg  # a lone event is sent as it is
                assert all(e["type"] == "event" for e in msg["events"]), msg
                self.pending = msg["events"]
                msg = self.pending.pop(0)
        if msg["type"] == "event":
            key = 0 if msg.get("cluster") else msg["job"]
            self.seqs.setdefault(key, []).append(msg["seq"])
            self.events.append(msg)
        return msg

    def subscribe(self, job=None, after=0, batch=None):
        req = {"type": "subscribe", "after": after}
        if batch is not None:
            req["batch"] = batch
        req.update({"job": job} if job is not None else {"cluster": True})
        self.ws.send_json(req)
        msg = self.next()
        assert msg["type"] == "subscribed", msg
        return msg

    def read_until(self, pred, timeout=60):
        """Reads messages until pred(msg); returns that message."""
        while True:
            msg = self.next(timeout)
            if pred(msg):
                return msg

    def read_to(self, job, seq):
        """Reads until job's stream has reached `seq`."""
        if self.seqs.get(job) and self.seqs[job][-1] >= seq:
            return
        self.read_until(lambda m: m["type"] == "event" and m.get("job", 0) == job
                        and m["seq"] >= seq)

    def close(self):
        self.ws.close()


def head(sql, job):
    return int(sql(f"SELECT stream_seq FROM jobs WHERE id = {job}"))


def append(sql, job, n, pad=0, kind="report"):
    """Appends n report rows to job's stream in one statement (as batched ingestion does)."""
    sql("SELECT ty_stream_append_batch((SELECT jsonb_agg(jsonb_build_object("
        f"'job_id', {job}, 'kind', '{kind}', 'attempt', 1, 'rank', g % 2, 'body', "
        f"jsonb_build_object('k', g, 'pad', repeat('x', {pad}))) ORDER BY g) "
        f"FROM generate_series(1, {n}) g))")


def pending_job(server, name="s"):
    return server.submit({"name": name, "entrypoint": ["true"]})["id"]


def assert_exactly(seqs, first, last):
    assert seqs == list(range(first, last + 1)), seqs


# ---------------------------------------------------------------- ordering and resume


def test_rows_arrive_in_order_and_resume_after_reconnect_without_gap_or_duplicate(server, sql):
    job = pending_job(server)
    a = Sub(server)
    sub = a.subscribe(job)
    assert sub["head"] == head(sql, job)
    append(sql, job, 30)
    a.read_to(job, 20)
    got = list(a.seqs[job])
    a.close()  # mid-stream: some rows may have been queued but not read
    append(sql, job, 40)
    b = Sub(server)
    b.subscribe(job, after=got[-1])
    append(sql, job, 10)
    last = head(sql, job)
    b.read_to(job, last)
    assert_exactly(got + b.seqs[job], 1, last)
    kinds = [e["kind"] for e in a.events + b.events]
    assert kinds[0] == "event" and kinds.count("report") == 80
    report = next(e for e in b.events if e["kind"] == "report")
    assert report["attempt"] == 1 and report["rank"] in (0, 1) and "k" in report["data"]
    assert report["at"].endswith("Z")


def test_batched_delivery_keeps_order_and_resumes_without_gap_or_duplicate(server, sql):
    job = pending_job(server)
    plain = Sub(server)
    plain.subscribe(job)
    a = Sub(server)
    a.subscribe(job, batch=True)
    append(sql, job, 300)  # one commit: the stream thread queues the rows together
    a.read_to(job, 200)
    got = list(a.seqs[job])
    assert a.frames["events"] > 0, a.frames  # several rows shared a frame
    a.close()  # mid-stream: some rows may have been queued but not read
    append(sql, job, 200)
    b = Sub(server)
    b.subscribe(job, after=got[-1], batch=True)  # catch-up, then live rows, batched
    append(sql, job, 100)
    last = head(sql, job)
    b.read_to(job, last)
    assert_exactly(got + b.seqs[job], 1, last)
    assert sum(e["kind"] == "report" for e in a.events + b.events) == 600
    # A subscriber that did not ask gets the same rows one per frame, as before.
    plain.read_to(job, last)
    assert_exactly(plain.seqs[job], 1, last)
    assert plain.frames["events"] == 0 and plain.frames["event"] == last, plain.frames


def test_catch_up_larger_than_the_queue_is_paced_not_dropped(server_factory, pg):
    server = server_factory(extra_args=["--stream-queue-max", "50"])
    sql = lambda text: pg.psql(text, db=db_name(server))  # noqa: E731
    job = pending_job(server)
    append(sql, job, 1000)
    a = Sub(server)
    a.subscribe(job, after=0)
    a.read_to(job, head(sql, job))
    assert_exactly(a.seqs[job], 1, head(sql, job))


def test_real_job_streams_status_and_worker_events_and_resumes(server, agent_factory, sql):
    job = server.submit({"name": "real", "entrypoint": ["python3", "-c", "print('hi')"],
                         "scaling_config": {"num_workers": 2}})["id"]
    a = Sub(server)
    a.subscribe(job)
    agent_factory(cpus=4)
    # Read up to the first worker event, then drop the connection.
    a.read_until(lambda m: m["type"] == "event" and m["kind"] == "worker")
    got = list(a.seqs[job])
    a.close()
    server.wait_job(job, {"SUCCEEDED"})
    b = Sub(server)
    b.subscribe(job, after=got[-1])
    b.read_until(lambda m: m["type"] == "event" and m["kind"] == "event"
                 and m["data"]["status"] == "SUCCEEDED")
    stored = [int(s) for s in sql(f"SELECT string_agg(seq::text, ',' ORDER BY seq) "
                                  f"FROM job_stream WHERE job_id = {job}").split(",")]
    b.read_to(job, stored[-1])
    assert got + b.seqs[job] == stored
    events = a.events + b.events
    statuses = [e["data"]["status"] for e in events if e["kind"] == "event"]
    assert statuses[0] == "PENDING" and statuses[-1] == "SUCCEEDED" and "RUNNING" in statuses
    workers = [e["data"] for e in events if e["kind"] == "worker"]
    assert {w["rank"] for w in workers} == {0, 1}
    assert {w["status"] for w in workers} >= {"RUNNING", "EXITED"}


# ---------------------------------------------------------------- slow subscribers


# The stalled client reads nothing, pongs included: --ws-ping-s keeps the server's ping
# timeout (three times it) from closing it first when a loaded machine makes the test slow.
STALL_ARGS = ["--stream-queue-max", "100", "--ws-ping-s", "600"]


def test_stalled_subscriber_is_closed_with_resume_point_while_fast_one_gets_everything(
        server_factory, pg):
    server = server_factory(extra_args=STALL_ARGS)
    sql = lambda text: pg.psql(text, db=db_name(server))  # noqa: E731
    job = pending_job(server)
    stalled = Sub(server, rcvbuf=8192)
    stalled.subscribe(job, after=head(sql, job))
    fast = Sub(server)
    fast.subscribe(job, after=head(sql, job))
    first = head(sql, job) + 1
    # 12 MB in 8 KB rows: more than the stalled client's socket buffers and queue can hold. The
    # fast one is waited for after each batch, so it is never more than one batch behind.
    for _ in range(30):
        append(sql, job, 50, pad=8192)
        fast.read_to(job, head(sql, job))
    last = head(sql, job)
    assert_exactly(fast.seqs[job], first, last)
    # The stalled one now reads: a gapless prefix, then `closing` naming where it stopped.
    closing = stalled.read_until(lambda m: m["type"] != "event")
    assert closing["type"] == "closing" and closing["reason"] == "slow_consumer", closing
    seqs = stalled.seqs.get(job, [])
    resume = closing["resume"]["job"][str(job)]
    assert_exactly(seqs, first, resume)
    assert resume < last
    with pytest.raises(Closed):
        stalled.next()
    # It resumes from there and gets the rest, once each.
    again = Sub(server)
    again.subscribe(job, after=resume)
    again.read_to(job, last)
    assert_exactly(seqs + again.seqs[job], first, last)


def test_stalled_batched_subscriber_is_closed_while_a_fast_batched_one_keeps_up(
        server_factory, pg):
    server = server_factory(extra_args=STALL_ARGS)
    sql = lambda text: pg.psql(text, db=db_name(server))  # noqa: E731
    job = pending_job(server)
    stalled = Sub(server, rcvbuf=8192)
    stalled.subscribe(job, after=head(sql, job), batch=True)
    fast = Sub(server)
    fast.subscribe(job, after=head(sql, job), batch=True)
    first = head(sql, job) + 1
    for _ in range(30):  # 12 MB in 8 KB rows, as above
        append(sql, job, 50, pad=8192)
        fast.read_to(job, head(sql, job))
    last = head(sql, job)
    assert_exactly(fast.seqs[job], first, last)
    assert fast.frames["events"] > 0, fast.frames
    closing = stalled.read_until(lambda m: m["type"] != "event")
    assert closing["type"] == "closing" and closing["reason"] == "slow_consumer", closing
    seqs = stalled.seqs.get(job, [])
    resume = closing["resume"]["job"][str(job)]
    assert_exactly(seqs, first, resume)
    assert resume < last
    with pytest.raises(Closed):
        stalled.next()
    again = Sub(server)
    again.subscribe(job, after=resume, batch=True)
    again.read_to(job, last)
    assert_exactly(seqs + again.seqs[job], first, last)


# ---------------------------------------------------------------- cluster stream


def test_cluster_stream_shows_job_status_changes_and_nodes_joining_and_drained(
        server, agent_factory):
    c = Sub(server)
    c.subscribe(None)
    job = server.submit({"name": "clu", "entrypoint": ["true"]})["id"]
    agent = agent_factory(cpus=2)
    node = agent.node_id
    c.read_until(lambda m: m["type"] == "event" and m["kind"] == "node"
                 and m["data"]["id"] == node and m["data"]["status"] == "ALIVE")
    c.read_until(lambda m: m["type"] == "event" and m["kind"] == "job"
                 and m["data"]["id"] == job and m["data"]["status"] == "SUCCEEDED")
    assert server.request("POST", f"/api/v1/nodes/{node}/drain").status == 200
    c.read_until(lambda m: m["type"] == "event" and m["kind"] == "node"
                 and m["data"]["id"] == node and m["data"]["draining"] is True)
    statuses = [e["data"]["status"] for e in c.events
                if e["kind"] == "job" and e["data"]["id"] == job]
    assert statuses[0] == "PENDING" and "RUNNING" in statuses
    seqs = c.seqs[0]
    assert seqs == sorted(set(seqs))
    assert all("job" not in e and e["cluster"] is True for e in c.events)


def test_cluster_rows_committed_out_of_seq_order_arrive_in_seq_order(server, pg, sql):
    c = Sub(server)
    c.subscribe(None)
    node_sql = ("INSERT INTO nodes (id, hostname, address, status, resources) VALUES "
                "('{0}', '{0}', '127.0.0.1', 'ALIVE', '{{}}'::jsonb);")
    # Session 1 takes the lower seq and holds its transaction open.
    slow = subprocess.Popen(["psql", "-h", pg.sockdir, "-U", "trainyard", "-d", db_name(server),
                             "-XAtq", "-v", "ON_ERROR_STOP=1"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # (each node's own row: other tests' nodes of this server may take seqs meanwhile)
    slow.stdin.write("BEGIN;\n" + node_sql.format("held") +
                     "SELECT 'took:' || max(seq) FROM cluster_stream WHERE node_id = 'held';\n")
    slow.stdin.flush()
    line = slow.stdout.readline().strip()
    assert line.startswith("took:"), line
    low = int(line[5:])
    # Session 2 takes a higher seq and commits first.
    sql(node_sql.format("quick"))
    high = int(sql("SELECT max(seq) FROM cluster_stream WHERE node_id = 'quick'"))
    assert high > low
    slow.stdin.write("NOTIFY ty_stream; COMMIT;\n")
    slow.stdin.close()
    assert slow.wait(timeout=30) == 0
    c.read_until(lambda m: m["type"] == "event" and m["seq"] >= high)
    got = [(e["seq"], e["data"]["id"]) for e in c.events if e["kind"] == "node"]
    assert (low, "held") in got and (high, "quick") in got
    assert c.seqs[0] == sorted(set(c.seqs[0]))


# ---------------------------------------------------------------- authentication


def test_a_request_before_auth_is_refused_and_the_connection_closed(server):
    s = Sub(server, auth=False)
    s.ws.send_json({"type": "subscribe", "cluster": True})
    got = s.ws.expect_closed()
    assert got[0]["type"] == "error" and got[0]["code"] == "not_authenticated", got


def test_a_bad_token_is_refused_and_the_connection_closed(server):
    s = Sub(server, auth=False)
    s.ws.send_json({"type": "auth", "token": "ty_not-a-token"})
    got = s.ws.expect_closed()
    assert got[0]["type"] == "error" and got[0]["code"] == "bad_token", got


def test_a_viewer_token_may_subscribe(server, sql):
    job = pending_job(server)
    s = Sub(server, token=server.create_token("watcher", "viewer"))
    assert s.welcome["role"] == "viewer"
    s.subscribe(job, after=0)
    s.read_to(job, head(sql, job))


def test_a_token_in_the_url_is_not_accepted(server):
    s = Sub(server, path=f"/stream?token={server.admin_token}", auth=False)
    s.ws.send_json({"type": "subscribe", "cluster": True})
    got = s.ws.expect_closed()
    assert got[0]["code"] == "not_authenticated", got


def test_auth_none_needs_no_auth_message(server_factory):
    server = server_factory(auth="none")
    s = Sub(server, auth=False)
    job = pending_job(server)
    s.subscribe(job)


def test_stream_and_agent_subprotocols_do_not_mix(server):
    with pytest.raises((ConnectionError, Closed, OSError)):
        WebSocket(server.ws_url + "/stream", subprotocol="trainyard-agent.v1")
    with pytest.raises((ConnectionError, Closed, OSError)):
        WebSocket(server.ws_url + "/agent", subprotocol=PROTOCOL)


# ---------------------------------------------------------------- requests


def test_a_subscriber_of_one_job_gets_nothing_of_another(server, sql):
    a_job, b_job = pending_job(server, "a"), pending_job(server, "b")
    s = Sub(server)
    s.subscribe(a_job, after=head(sql, a_job))
    append(sql, b_job, 20)
    append(sql, a_job, 1)
    s.read_to(a_job, head(sql, a_job))
    assert {e["job"] for e in s.events} == {a_job}


def test_unknown_job_and_bad_requests_get_errors_and_the_connection_stays(server, sql):
    s = Sub(server)
    s.ws.send_json({"type": "subscribe", "job": 999999})
    assert s.next() == {"type": "error", "code": "unknown_job",
                        "detail": "there is no job 999999"}
    s.ws.send_text("{not json")
    assert s.next()["code"] == "bad_json"
    s.ws.send_json({"type": "dance"})
    assert s.next()["code"] == "unknown_type"
    s.ws.send_json({"type": "subscribe", "job": -3})
    err = s.next()
    assert err["code"] == "bad_request" and "job" in err["detail"]
    job = pending_job(server)
    s.subscribe(job)
    s.ws.send_json({"type": "subscribe", "job": job})
    assert s.read_until(lambda m: m["type"] == "error")["code"] == "already_subscribed"


def test_a_batch_that_is_not_a_boolean_is_refused_naming_the_field(server, sql):
    s = Sub(server)
    job = pending_job(server)
    s.ws.send_json({"type": "subscribe", "job": job, "batch": "yes"})
    err = s.next()
    assert err["type"] == "error" and err["code"] == "bad_request", err
    assert "'batch'" in err["detail"]
    s.subscribe(job, batch=True)  # the connection stays


def test_unsubscribed_job_sends_nothing_more(server, sql):
    a_job, b_job = pending_job(server, "a"), pending_job(server, "b")
    s = Sub(server)
    s.subscribe(a_job, after=head(sql, a_job))
    s.ws.send_json({"type": "unsubscribe", "job": a_job})
    s.subscribe(b_job, after=head(sql, b_job))  # answered after the unsubscribe was done
    append(sql, a_job, 5)
    append(sql, b_job, 1)
    s.read_to(b_job, head(sql, b_job))
    assert {e["job"] for e in s.events} == {b_job}


def test_connections_beyond_the_cap_are_refused_with_an_error(server_factory):
    server = server_factory(extra_args=["--max-stream-clients", "2"])
    kept = [Sub(server), Sub(server)]
    extra = Sub(server, auth=False)
    got = extra.ws.expect_closed()
    assert got[0]["code"] == "too_many_clients", got
    kept[0].close()
    # A place is free again once the server has seen the close: poll for it.
    for _ in range(600):
        try:
            Sub(server).close()
            break
        except (AssertionError, Closed):
            time.sleep(0.05)
    else:
        raise AssertionError("no connection accepted after one closed")
    kept[1].close()


def test_version_names_the_stream_endpoint(server):
    v = server.request("GET", "/api/v1/version").json
    assert v["stream"] == {"port": server.ws_port, "path": "/stream", "protocol": PROTOCOL}


def test_server_shutdown_sends_closing_with_resume_points(server_factory, pg):
    server = server_factory()
    sql = lambda text: pg.psql(text, db=db_name(server))  # noqa: E731
    job = pending_job(server)
    s = Sub(server)
    s.subscribe(job, after=0)
    s.read_to(job, head(sql, job))
    s.subscribe(None, after=0)
    server.stop()
    closing = s.read_until(lambda m: m["type"] == "closing")
    assert closing["reason"] == "shutdown"
    assert closing["resume"]["job"] == {str(job): s.seqs[job][-1]}
    assert "cluster" in closing["resume"]
