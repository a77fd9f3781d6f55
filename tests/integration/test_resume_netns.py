"""Resume anywhere across hosts (issue 11): two agents in network namespaces of their own (the
set-up of test_multihost, on another subnet), the C Fashion-MNIST example checkpoints on node A
(uploaded to the server, the default path), and a job with resume_from_checkpoint that can run
only on node B (A drained) fetches it through the server, continues from the next epoch and
reaches the accuracy of an uninterrupted run of the same length, trained on A first (the example
is seeded: within TOLERANCE of it, which the resumed job's min_accuracy enforces too)."""
import os

import pytest

import harness
from test_artifacts import wait_artifacts
from test_resume import fashion_mnist_spec, rank0_series

# test_multihost uses 10.231.N.0/24 (harness.netns_hosts): another second octet, so both may
# run at once.
NET = 232
TOLERANCE = 0.01


@pytest.fixture
def hosts():
    with harness.netns_hosts(NET) as h:
        yield h


@pytest.fixture
def netns_server(hosts, database):
    srv = harness.Server(database_url=database, host="0.0.0.0").start()
    try:
        yield srv
    finally:
        assert srv.stop() == 0, srv.log_text()


def start_agent(srv, hosts, i):
    """The agent of namespace i; its uploads and fetches go to the server's REST port over the
    bridge (the default, --server's host on port 8080, is not this server's)."""
    return harness.netns_agent(srv, hosts, i, cpus=2, env={
        "TRAINYARD_API_URL": f"http://{hosts['bridge_addr']}:{srv.port}"}).start()


def test_fashion_mnist_checkpointed_on_a_resumes_on_b_only(netns_server, hosts):
    srv = netns_server
    agents = [start_agent(srv, hosts, 0)]
    try:
        a = agents[0]
        first = srv.submit(fashion_mnist_spec(epochs=1))["id"]
        done = srv.wait_job(first, {"SUCCEEDED", "FAILED"}, timeout=300)
        assert done["status"] == "SUCCEEDED", (done, a.worker_log(first, 0))
        [ck] = wait_artifacts(srv, first, 1, timeout=60)
        assert ck["artifact"]["state"] == "complete", (ck, a.log_text())
        assert [loc["node_id"] for loc in ck["location"]] == [a.node_id]
        steps = ck["step"]
        assert steps > 0 and rank0_series(srv, first, "epoch") == [(steps, 1)]
        whole = srv.submit(fashion_mnist_spec(epochs=2))["id"]
        done = srv.wait_job(whole, {"SUCCEEDED", "FAILED"}, timeout=300)
        assert done["status"] == "SUCCEEDED", (done, a.worker_log(whole, 0))
        bar = done["result"]["metrics"]["accuracy"] - TOLERANCE
        assert bar > 0.5, done["result"]

        # A takes no new work; B is another host with its own data directory and no copy.
        assert srv.request("POST", f"/api/v1/nodes/{a.node_id}/drain").status == 200
        agents.append(start_agent(srv, hosts, 1))
        b = agents[1]
        spec = fashion_mnist_spec(epochs=2, min_accuracy=bar)
        spec["resume_from_checkpoint"] = ck["id"]
        second = srv.submit(spec)["id"]
        done = srv.wait_job(second, {"SUCCEEDED", "FAILED"}, timeout=300)
        log = b.worker_log(second, 0)
        assert done["status"] == "SUCCEEDED", (done, log, b.log_text())
        workers = srv.request("GET", f"/api/v1/jobs/{second}/workers").json["workers"]
        assert sorted(w["rank"] for w in workers) == [0, 1]
        assert {w["node_id"] for w in workers} == {b.node_id}, workers
        fetched = os.path.join(os.path.realpath(b.data_dir), "checkpoints", "fetched",
                               ck["artifact"]["sha256"])
        assert f"resumed from {fetched} after epoch 1" in log, log
        assert "fetched from the server" in b.log_text(), b.log_text()
        # One epoch left, reported as epoch 2 with its steps counted on from the checkpoint's.
        assert rank0_series(srv, second, "epoch") == [(2 * steps, 2)]
        assert done["result"]["metrics"]["accuracy"] >= bar, (done["result"], bar)
        events = srv.request("GET", f"/api/v1/jobs/{second}/events").json["events"]
        assert not any("holds no copy" in (e["message"] or "") for e in events), events
    finally:
        for ag in agents:
            assert ag.stop() == 0, ag.log_text()
