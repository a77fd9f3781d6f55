"""Several hosts on one machine: each agent in its own network namespace, joined by a bridge,
so MASTER_ADDR is a real other address and workers talk across the (virtual) network. The
TF_CONFIG checks also run on loopback, with agents advertising 127.0.0.2 and 127.0.0.3."""
import json
import os

import pytest

import harness

PY = "/usr/bin/python3"


@pytest.fixture
def hosts():
    with harness.netns_hosts() as h:
        yield h


@pytest.fixture
def cluster(hosts, database):
    srv = harness.Server(database_url=database, host="0.0.0.0").start()
    agents = []
    try:
        for i in range(len(hosts["namespaces"])):
            agents.append(harness.netns_agent(srv, hosts, i, cpus=1).start())
        yield srv, agents
    finally:
        for a in agents:
            assert a.stop() == 0, a.log_text()
        assert srv.stop() == 0, srv.log_text()


def run_env_dump(srv, spec):
    """Runs `spec` (its entrypoint replaced by one that writes the worker's environment to
    OUT/env-RANK) to success; returns ({rank: env}, job id)."""
    out = harness.make_tmpdir("ty-mh-")
    job = srv.submit(dict(spec, entrypoint=["/bin/sh", "-c", f"env > {out}/env-$RANK"]))
    done = srv.wait_job(job["id"], {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    envs = {}
    for name in os.listdir(out):
        with open(os.path.join(out, name)) as f:
            envs[int(name.split("-")[1])] = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
    return envs, job["id"]


def check_tf_config_lists_each_nodes_address(srv, expected_addrs):
    """A 2-worker tensorflow job spread over two nodes: every worker's TF_CONFIG names, for each
    rank, the address of the node that runs it and the port master_port + rank."""
    envs, job = run_env_dump(srv, {"backend": "tensorflow", "scaling_config": {
        "num_workers": 2, "placement_strategy": "STRICT_SPREAD"}})
    assert sorted(envs) == [0, 1]
    workers = srv.request("GET", f"/api/v1/jobs/{job}/workers").json["workers"]
    addr_of_rank = {w["rank"]: srv.request("GET", f"/api/v1/nodes/{w['node_id']}").json["address"]
                    for w in workers}
    assert sorted(addr_of_rank.values()) == sorted(expected_addrs)
    port = int(envs[0]["MASTER_PORT"])
    want = [f"{addr_of_rank[r]}:{port + r}" for r in (0, 1)]
    for rank, env in envs.items():
        tf = json.loads(env["TF_CONFIG"])
        assert tf["cluster"]["worker"] == want, (rank, tf)
        assert tf["task"] == {"type": "worker", "index": rank}
        assert env["MASTER_ADDR"] == addr_of_rank[0]


def test_tf_config_lists_each_nodes_own_address(cluster, hosts):
    srv, agents = cluster
    check_tf_config_lists_each_nodes_address(srv, hosts["addrs"])


def test_gloo_and_nccl_use_the_interface_of_the_advertised_address(cluster, hosts):
    srv, agents = cluster
    envs, job = run_env_dump(srv, {"scaling_config": {"num_workers": 2,
                                                      "placement_strategy": "STRICT_SPREAD"}})
    for env in envs.values():
        assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"]
        assert env["GLOO_SOCKET_IFNAME"].startswith("tyn"), env  # the namespace's veth end


@pytest.fixture
def loopback_cluster(database):
    """Two agents on this host advertising 127.0.0.2 and 127.0.0.3 (no namespaces needed)."""
    srv = harness.Server(database_url=database).start()
    agents = []
    try:
        for addr in ("127.0.0.2", "127.0.0.3"):
            agents.append(harness.Agent(srv, cpus=1, extra_args=["--address", addr]).start())
        yield srv, agents
    finally:
        for a in agents:
            assert a.stop() == 0, a.log_text()
        assert srv.stop() == 0, srv.log_text()


def test_tf_config_lists_each_nodes_own_address_on_loopback(loopback_cluster):
    srv, agents = loopback_cluster
    check_tf_config_lists_each_nodes_address(srv, ["127.0.0.2", "127.0.0.3"])


def test_agents_advertise_their_namespace_addresses(cluster, hosts):
    srv, agents = cluster
    nodes = {n["id"]: n for n in srv.request("GET", "/api/v1/nodes").json["nodes"]}
    assert sorted(nodes[a.node_id]["address"] for a in agents) == sorted(hosts["addrs"])


def test_master_addr_is_the_rank0_hosts_address(cluster, hosts):
    srv, agents = cluster
    out = harness.make_tmpdir("ty-mh-")
    job = srv.submit({"entrypoint": ["/bin/sh", "-c", f"env > {out}/env-$RANK"],
                      "scaling_config": {"num_workers": 2, "placement_strategy": "STRICT_SPREAD"}})
    assert srv.wait_job(job["id"], {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    envs = []
    for r in (0, 1):
        with open(os.path.join(out, f"env-{r}")) as f:
            envs.append(dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l))
    workers = srv.request("GET", f"/api/v1/jobs/{job['id']}/workers").json["workers"]
    rank0_node = next(w["node_id"] for w in workers if w["rank"] == 0)
    rank0_addr = srv.request("GET", f"/api/v1/nodes/{rank0_node}").json["address"]
    assert rank0_addr in hosts["addrs"]
    assert envs[0]["MASTER_ADDR"] == envs[1]["MASTER_ADDR"] == rank0_addr


def test_torch_ddp_across_namespaces(cluster):
    srv, agents = cluster
    spec = {"name": "ddp-multihost", "entrypoint": [PY, "examples/torch_fashion_mnist/train.py"],
            "working_dir": os.path.abspath(harness.SOURCE_DIR),
            "train_loop_config": {"epochs": 1, "limit_train": 6000, "limit_test": 1000},
            "scaling_config": {"num_workers": 2, "placement_strategy": "STRICT_SPREAD"}}
    job = srv.submit(spec)
    done = srv.wait_job(job["id"], {"SUCCEEDED", "FAILED"}, timeout=600)
    logs = "".join(a.worker_log(job["id"], r) for a in agents for r in (0, 1)
                   if os.path.exists(os.path.join(a.data_dir, "logs", str(job["id"]), "1",
                                                  f"rank-{r}.log")))
    assert done["status"] == "SUCCEEDED", (done, logs)
    assert "final test accuracy" in logs
    json.dumps(done)
