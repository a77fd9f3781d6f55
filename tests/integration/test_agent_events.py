"""worker_started events from an agent, recorded by the server in batches: the test speaks the
agent protocol itself (FakeAgent from test_metrics.py) so it controls what arrives together."""
import pytest

# srv and sql are test_metrics.py's fixtures (a server that the file's tests share, its database
# reachable by psql).
from test_metrics import NODE_NUMBERS, FakeAgent, sql, srv  # noqa: F401


@pytest.fixture
def node(srv):
    a = FakeAgent(srv, node_id=f"node-{next(NODE_NUMBERS)}", cpus=16)
    yield a
    a.close()


def launched(srv, node, num_workers):
    job = srv.submit({"name": "batch", "entrypoint": ["true"],
                      "scaling_config": {"num_workers": num_workers}})
    launch = node.wait_launch(job["id"])
    assert [w["rank"] for w in launch["workers"]] == list(range(num_workers))
    return job["id"]


def send_starts(node, job, ranks):
    """Sends worker_started for each rank back to back, without waiting for acks."""
    return [node.send_event({"type": "worker_started", "job_id": str(job), "attempt": 1,
                             "rank": r, "pid": 1000 + r}) for r in ranks]


def test_worker_starts_sent_together_are_all_recorded_then_acked(srv, node, sql):
    job = launched(srv, node, 16)
    seqs = send_starts(node, job, range(16))
    for seq in seqs:
        node.wait_ack(seq)
    srv.wait_job(job, {"RUNNING"})
    rows = sql(f"SELECT string_agg(rank || ':' || pid || ':' || status, ',' ORDER BY rank) "
               f"FROM workers WHERE job_id = {job}")
    assert rows == ",".join(f"{r}:{1000 + r}:RUNNING" for r in range(16))


def test_repeated_worker_starts_in_one_batch_are_acked_and_change_nothing(srv, node, sql):
    job = launched(srv, node, 2)
    seqs = send_starts(node, job, [0, 1, 0, 1])
    for seq in seqs:
        node.wait_ack(seq)
    srv.wait_job(job, {"RUNNING"})
    assert sql(f"SELECT count(*) FROM workers WHERE job_id = {job} AND status = 'RUNNING'") == "2"


@pytest.mark.parametrize("errcode", ["40001", "P0001"])  # retryable, and a hard failure
def test_worker_start_not_recorded_is_not_acked_nor_any_after_it(srv, node, sql, errcode):
    job = launched(srv, node, 3)
    sql(f"CREATE OR REPLACE FUNCTION ty_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.rank = 1 AND NEW.status = 'RUNNING' THEN "
        f"RAISE EXCEPTION 'injected' USING ERRCODE = '{errcode}'; END IF; RETURN NEW; END $$; "
        "CREATE TRIGGER ty_test_fail BEFORE UPDATE ON workers "
        "FOR EACH ROW EXECUTE FUNCTION ty_test_fail()")
    seqs = send_starts(node, job, range(3))
    got = node.ws.expect_closed()
    # Rank 0 comes before the failure and is recorded (alone, or one by one after its batch
    # failed); neither rank 1 nor rank 2 may be acked, or the agent would forget them.
    assert [m["seq"] for m in got if m["type"] == "ack"] == [seqs[0]], got
    assert sql(f"SELECT string_agg(rank || ':' || status, ',' ORDER BY rank) "
               f"FROM workers WHERE job_id = {job}") == "0:RUNNING,1:PLACED,2:PLACED"
    sql("DROP TRIGGER ty_test_fail ON workers; DROP FUNCTION ty_test_fail()")
    node.connect(workers=[{"job_id": str(job), "attempt": 1, "rank": r, "pid": 1000 + r,
                           "status": "RUNNING", "exit_code": None, "signal": None}
                          for r in range(3)])
    for seq in send_starts(node, job, [1, 2]):
        node.wait_ack(seq)
    srv.wait_job(job, {"RUNNING"})
