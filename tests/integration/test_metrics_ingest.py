"""Reports ingested in batches (server/control/control_report.c, migration 0010): a burst of
reports is committed in few transactions, every point stored once and streamed once (one
`report` row per report in job_stream), acks only after the commit, and a server killed with
SIGKILL mid-burst loses no acked report and duplicates none once the agent resends."""
import json
import signal
import socket

from test_metrics import FakeAgent, metrics, node, running_job, sql, srv  # noqa: F401 (fixtures)
from test_stream import Sub
from wsclient import Closed


def burst(node, job, reports):
    """Sends the reports [(rank, k), ...] without waiting for acks; returns their event seqs."""
    return [node.send_event(node.report_msg(job, rank, k, point(rank, k), step=10 * k))
            for rank, k in reports]


def point(rank, k):
    return {"loss": 1.0 / k + rank, "acc": k / 1000.0, "lr": 0.001 * rank}


def wait_acked(node, seq, timeout=60):
    """Waits for an ack covering `seq` (acks are cumulative: one may cover many reports);
    returns the seq it acked."""
    return node.ws.wait_for(lambda m: m["type"] == "ack" and m["seq"] >= seq, timeout)["seq"]


def acks_until_closed(ws, timeout=10.0):
    """The highest seq acked before the connection ends (or `timeout` passes)."""
    best = 0
    while True:
        try:
            m = ws.recv_json(timeout=timeout)
        except (Closed, OSError, socket.timeout):
            return best
        if m.get("type") == "ack":
            best = max(best, m["seq"])


def stream_reports(sql, job):
    """The job's `report` stream rows: [(seq, rank, k, data)] in seq order."""
    out = sql(f"SELECT seq, rank, body FROM job_stream WHERE job_id = {job} AND kind = 'report' "
              "ORDER BY seq")
    rows = []
    for line in filter(None, out.splitlines()):
        seq, rank, body = line.split("|", 2)
        data = json.loads(body)
        rows.append((int(seq), int(rank), data["k"], data))
    return rows


def stored_points(srv, job):
    """{(rank, k, name): value} of GET /api/v1/jobs/{id}/metrics, checking each is there once."""
    got = {}
    for p in metrics(srv, job, "?max_points=10000"):
        key = (p["rank"], p["step"] // 10, p["name"])
        assert key not in got, f"stored twice: {key}"
        got[key] = p["value"]
    return got


def expected_points(reports):
    return {(rank, k, name): v for rank, k in reports for name, v in point(rank, k).items()}


def test_a_burst_is_stored_once_and_streamed_once(srv, node, sql):
    job = running_job(srv, node, num_workers=4)
    reports = [(rank, k) for k in range(1, 101) for rank in range(4)]
    seqs = burst(node, job, reports)
    node.wait_ack(seqs[-1], timeout=60)
    assert stored_points(srv, job) == expected_points(reports)
    rows = stream_reports(sql, job)
    assert sorted((rank, k) for _, rank, k, _ in rows) == sorted(reports)
    # Each rank's reports are streamed in the order they were sent.
    for rank in range(4):
        assert [k for _, r, k, _ in rows if r == rank] == list(range(1, 101))
    seq0, rank, k, data = rows[0]
    # The values are stored once, in the reports row (issue 27): the stream row holds the rest,
    # and a subscriber reads the values from the reports row, as before.
    assert data == {"rank": rank, "attempt": 1, "k": k, "step": 10 * k,
                    "time": data["time"], "checkpoint": False}
    sub = Sub(srv)
    sub.subscribe(job, after=seq0 - 1)
    ev = sub.read_until(lambda m: m["type"] == "event" and m["seq"] == seq0)
    sub.close()
    assert ev["kind"] == "report"
    assert ev["data"] == data | {"metrics": point(rank, k)}
    # The whole stream (worker rows, events and reports) stays contiguous: 1, 2, 3, ...
    seqs_all = [int(s) for s in sql(f"SELECT seq FROM job_stream WHERE job_id = {job} "
                                    "ORDER BY seq").split()]
    assert seqs_all == list(range(1, len(seqs_all) + 1))
    # The same burst again (an agent resending its spool): acked, nothing new stored or streamed.
    again = burst(node, job, reports)
    node.wait_ack(again[-1], timeout=60)
    assert len(stream_reports(sql, job)) == len(reports)
    assert int(sql(f"SELECT count(*) FROM metrics WHERE job_id = {job}")) == 3 * len(reports)
    assert int(sql(f"SELECT count(*) FROM reports WHERE job_id = {job}")) == len(reports)


def test_a_flood_past_what_a_lane_queues_is_stored_in_order_and_acked_once(srv, node, sql):
    """One agent sends more reports than its lane queues at once (CTL_QUEUE_MAX: 8 batches of
    512) without reading an ack: the control loop waits for the lane's batches before it reads
    on (control_report.c, make_room), and every report is acked once, in the order sent, stored
    once and streamed in its rank's order."""
    job = running_job(srv, node, num_workers=4)
    reports = [(rank, k) for k in range(1, 1301) for rank in range(4)]
    seqs = burst(node, job, reports)
    acked = []
    while len(acked) < len(seqs):
        m = node.ws.recv_json(timeout=120)
        if m.get("type") == "ack":
            acked.append(m["seq"])
    assert acked == seqs
    assert int(sql(f"SELECT count(*) FROM reports WHERE job_id = {job}")) == len(reports)
    assert int(sql(f"SELECT count(*) FROM metrics WHERE job_id = {job}")) == 3 * len(reports)
    assert json.loads(sql(f"SELECT metrics FROM reports WHERE job_id = {job} AND rank = 3 "
                          "AND seq = 1300")) == point(3, 1300)
    rows = stream_reports(sql, job)
    for rank in range(4):
        assert [k for _, r, k, _ in rows if r == rank] == list(range(1, 1301))


def test_a_bad_report_in_a_burst_does_not_block_the_others(srv, node, sql):
    job = running_job(srv, node, num_workers=2)
    good = [(rank, k) for k in range(1, 21) for rank in range(2)]
    seqs = burst(node, job, good[:20])
    # PostgreSQL refuses this date: the batch it lands in fails and is retried one by one.
    bad = node.send_event(node.report_msg(job, 0, 99, {"loss": 9.0}) |
                          {"time": "2030-02-30T00:00:00Z"})
    seqs += burst(node, job, good[20:])
    assert seqs[-1] > bad
    node.wait_ack(seqs[-1], timeout=60)
    assert stored_points(srv, job) == expected_points(good)
    assert len(stream_reports(sql, job)) == len(good)


def test_server_stopped_mid_flood_exits_cleanly_and_the_resent_rest_is_stored_once(srv, node,
                                                                                   sql):
    """A server stopped (SIGTERM) while an agent's reports fill its lane's queue commits and acks
    the batch in flight, frees the reports still queued (under AddressSanitizer, exit 0 means no
    leak) without acking them; the agent sends them again to the next server, and each report is
    stored once."""
    job = running_job(srv, node, num_workers=4)
    reports = [(rank, k) for k in range(1, 1301) for rank in range(4)]
    seqs = burst(node, job, reports)
    sent = dict(zip(seqs, reports))
    acked = wait_acked(node, seqs[0])  # the first batch is committed; most are still queued
    assert srv.stop() == 0, srv.log_text()
    acked = max(acks_until_closed(node.ws, timeout=2), acked)
    node.close()
    srv.start()
    stored = stored_points(srv, job)
    for s in seqs:
        if s <= acked:
            rank, k = sent[s]
            assert stored.get((rank, k, "loss")) == point(rank, k)["loss"], (rank, k)
    node.connect(workers=[{"job_id": str(job), "attempt": 1, "rank": r, "pid": 1000 + r,
                           "status": "RUNNING", "exit_code": None, "signal": None}
                          for r in range(4)])
    rest = [sent[s] for s in seqs if s > acked]  # none when the stop came after the last ack
    if rest:
        node.wait_ack(burst(node, job, rest)[-1], timeout=120)
    assert stored_points(srv, job) == expected_points(reports)
    assert sorted((rank, k) for _, rank, k, _ in stream_reports(sql, job)) == sorted(reports)


def test_server_killed_mid_burst_loses_no_acked_report_and_duplicates_none(srv, node, sql):
    job = running_job(srv, node, num_workers=2)
    reports = [(rank, k) for k in range(1, 401) for rank in range(2)]
    sent = {}  # event seq -> (rank, k)
    first = burst(node, job, reports[:300])
    sent.update(zip(first, reports[:300]))
    acked = wait_acked(node, first[99])  # some are acked for sure
    try:
        more = burst(node, job, reports[300:600])
        sent.update(zip(more, reports[300:600]))
    except OSError:
        pass
    srv.stop(sig=signal.SIGKILL)
    acked = max(acks_until_closed(node.ws, timeout=2), acked)
    node.close()
    srv.start()
    # Every report acked before the kill is committed.
    must = [sent[s] for s in sorted(sent) if s <= acked]
    stored = stored_points(srv, job)
    for rank, k in must:
        for name, v in point(rank, k).items():
            assert stored.get((rank, k, name)) == v, (rank, k, name)
    # The agent reconnects and resends everything it holds from its spool: what was not acked,
    # and (as after an agent restart) some that were; then the rest of the burst.
    node.connect(workers=[{"job_id": str(job), "attempt": 1, "rank": r, "pid": 1000 + r,
                           "status": "RUNNING", "exit_code": None, "signal": None}
                          for r in (0, 1)])
    unacked = [sent[s] for s in sorted(sent) if s > acked]
    resend = must[-50:] + unacked + reports[len(sent):]
    seqs = burst(node, job, resend)
    node.wait_ack(seqs[-1], timeout=60)
    assert stored_points(srv, job) == expected_points(reports)
    rows = stream_reports(sql, job)
    assert sorted((rank, k) for _, rank, k, _ in rows) == sorted(reports)
    assert int(sql(f"SELECT count(*) FROM reports WHERE job_id = {job}")) == len(reports)
