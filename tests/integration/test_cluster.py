"""Scheduling and launch with real agents and real worker processes (one machine, several
agents = several nodes)."""
import os
import signal
import subprocess
import time

import pytest

import harness

PY = "/usr/bin/python3"


def env_dump_spec(out_dir, n, **scaling):
    return {"entrypoint": ["/bin/sh", "-c", f"env > {out_dir}/env-$RANK"],
            "scaling_config": {"num_workers": n, **scaling}}


def read_env(path):
    with open(path) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs."""
    return module_server_factory()


def test_job_spanning_two_nodes_gets_torch_environment(server, agent_factory):
    a = agent_factory(cpus=1)
    b = agent_factory(cpus=1)
    out = harness.make_tmpdir("ty-env-")
    job = server.submit(env_dump_spec(out, 2))
    done = server.wait_job(job["id"], {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done
    workers = server.request("GET", f"/api/v1/jobs/{job['id']}/workers").json["workers"]
    assert {w["node_id"] for w in workers} == {a.node_id, b.node_id}
    envs = [read_env(os.path.join(out, f"env-{r}")) for r in (0, 1)]
    for rank, e in enumerate(envs):
        assert e["RANK"] == str(rank) and e["WORLD_SIZE"] == "2"
        assert e["LOCAL_RANK"] == "0" and e["LOCAL_WORLD_SIZE"] == "1"
        assert e["NODE_RANK"] == str(rank)
        assert e["TRAINYARD_JOB_ID"] == str(job["id"]) and e["TRAINYARD_ATTEMPT"] == "1"
        assert e["CUDA_VISIBLE_DEVICES"] == ""
        assert "TRAINYARD_REPORT_SOCKET" in e
    assert envs[0]["MASTER_ADDR"] == envs[1]["MASTER_ADDR"]
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"]
    rank0_node = next(w["node_id"] for w in workers if w["rank"] == 0)
    node = server.request("GET", f"/api/v1/nodes/{rank0_node}").json
    assert envs[0]["MASTER_ADDR"] == node["address"]


def test_gpus_assigned_in_ascending_order_and_not_shared(server, agent_factory):
    agent_factory(cpus=8, gpus="0,1,2,3", gpu_type="H100")
    out = harness.make_tmpdir("ty-env-")
    first = server.submit({"entrypoint": ["/bin/sh", "-c", f"env > {out}/a-$RANK; sleep 30"],
                           "scaling_config": {"num_workers": 1, "use_gpu": True,
                                              "resources_per_worker": {"GPU": 2},
                                              "accelerator_type": "H100"}})
    server.wait_job(first["id"], {"RUNNING"})
    second = server.submit({"entrypoint": ["/bin/sh", "-c", f"env > {out}/b-$RANK"],
                            "scaling_config": {"num_workers": 2, "use_gpu": True}})
    server.wait_job(second["id"], {"SUCCEEDED"})
    a = read_env(os.path.join(out, "a-0"))
    b = [read_env(os.path.join(out, f"b-{r}")) for r in (0, 1)]
    assert a["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert sorted(e["CUDA_VISIBLE_DEVICES"] for e in b) == ["2", "3"]
    assert a["MASTER_PORT"] != b[0]["MASTER_PORT"]
    server.request("POST", f"/api/v1/jobs/{first['id']}/stop")
    server.wait_job(first["id"], {"STOPPED"})


def test_gang_job_waits_until_a_node_joins(server, agent_factory):
    agent_factory(cpus=1)
    out = harness.make_tmpdir("ty-env-")
    job = server.submit(env_dump_spec(out, 2, placement_strategy="STRICT_SPREAD"))
    time.sleep(1.5)
    pending = server.request("GET", f"/api/v1/jobs/{job['id']}").json
    assert pending["status"] == "PENDING"
    assert "STRICT_SPREAD" in pending["status_message"] or "node" in pending["status_message"]
    assert not os.listdir(out), "no worker may start before the whole gang fits"
    agent_factory(cpus=1)
    done = server.wait_job(job["id"], {"SUCCEEDED", "FAILED"})
    assert done["status"] == "SUCCEEDED", done


def test_unschedulable_job_says_which_resource_is_short(server, agent_factory):
    agent_factory(cpus=2)
    job = server.submit({"entrypoint": "true",
                         "scaling_config": {"num_workers": 1, "use_gpu": True}})
    deadline = time.time() + 10
    while time.time() < deadline:
        j = server.request("GET", f"/api/v1/jobs/{job['id']}").json
        if "GPU" in (j["status_message"] or ""):
            break
        time.sleep(0.1)
    assert j["status"] == "PENDING" and "GPU" in j["status_message"], j


def test_drained_node_gets_no_new_workers(server, agent_factory):
    a = agent_factory(cpus=2)
    r = server.request("POST", f"/api/v1/nodes/{a.node_id}/drain")
    assert r.status == 200 and r.json["draining"] is True
    job = server.submit({"entrypoint": "true"})
    time.sleep(1.5)
    assert server.request("GET", f"/api/v1/jobs/{job['id']}").json["status"] == "PENDING"
    assert server.request("POST", f"/api/v1/nodes/{a.node_id}/undrain").status == 200
    assert server.wait_job(job["id"], {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
    assert server.request("POST", "/api/v1/nodes/nope/drain").status == 404


def _processes_with(marker):
    out = subprocess.run(["pgrep", "-f", marker], stdout=subprocess.PIPE, text=True)
    return [p for p in out.stdout.split() if p]


def test_stop_kills_every_process_of_the_job(server, agent_factory):
    agent_factory(cpus=2)
    marker = f"sleep {1000 + os.getpid() % 1000}.{int(time.time()) % 100000}"
    job = server.submit({"entrypoint": ["/bin/sh", "-c",
                                        f"{marker} & sh -c '{marker}; :' & wait"],
                         "scaling_config": {"num_workers": 2}})
    server.wait_job(job["id"], {"RUNNING"})
    deadline = time.time() + 10
    while len(_processes_with(marker)) < 4 and time.time() < deadline:
        time.sleep(0.1)
    assert len(_processes_with(marker)) >= 4
    assert server.request("POST", f"/api/v1/jobs/{job['id']}/stop").status == 202
    done = server.wait_job(job["id"], {"STOPPED", "FAILED", "SUCCEEDED"}, timeout=30)
    assert done["status"] == "STOPPED", done
    assert _processes_with(marker) == []
    attempts = server.request("GET", f"/api/v1/jobs/{job['id']}/attempts").json["attempts"]
    assert [(a["attempt"], a["status"], a["world_size"]) for a in attempts] == [(1, "STOPPED", 2)]
    events = [e["status"] for e in
              server.request("GET", f"/api/v1/jobs/{job['id']}/events").json["events"]]
    assert events == ["PENDING", "STARTING", "RUNNING", "STOPPING", "STOPPED"]


def test_failing_worker_fails_job_and_stops_the_others(server, agent_factory):
    agent_factory(cpus=2)
    job = server.submit({"entrypoint": ["/bin/sh", "-c",
                                        'if [ "$RANK" = 1 ]; then exit 3; fi; sleep 1000'],
                         "scaling_config": {"num_workers": 2}})
    done = server.wait_job(job["id"], {"FAILED", "SUCCEEDED", "STOPPED"}, timeout=30)
    assert done["status"] == "FAILED"
    assert "rank 1" in done["result"]["error"] and "code 3" in done["result"]["error"]
    workers = server.request("GET", f"/api/v1/jobs/{job['id']}/workers").json["workers"]
    by_rank = {w["rank"]: w for w in workers}
    assert by_rank[1]["exit_code"] == 3
    assert by_rank[0]["signal"] == signal.SIGTERM


def test_timeout_is_enforced(server, agent_factory):
    agent_factory(cpus=2)
    job = server.submit({"entrypoint": ["sleep", "1000"], "timeout_s": 1})
    done = server.wait_job(job["id"], {"FAILED", "SUCCEEDED", "STOPPED"}, timeout=30)
    assert done["status"] == "FAILED" and "timed out" in done["result"]["error"]


def test_killed_agent_marks_node_lost_and_fails_its_job(server_factory, agent_factory):
    srv = server_factory(extra_args=["--heartbeat-timeout-s", "2"])
    a = agent_factory(srv=srv, cpus=2)
    job = srv.submit({"entrypoint": ["sleep", "1000.5"]})
    srv.wait_job(job["id"], {"RUNNING"})
    a.kill()
    deadline = time.time() + 15
    while time.time() < deadline:
        if srv.request("GET", f"/api/v1/nodes/{a.node_id}").json["status"] == "LOST":
            break
        time.sleep(0.2)
    assert srv.request("GET", f"/api/v1/nodes/{a.node_id}").json["status"] == "LOST"
    done = srv.wait_job(job["id"], {"FAILED"}, timeout=15)
    assert "lost" in done["result"]["error"]
    # The agent died with SIGKILL, so its worker is an orphan now; clean it up.
    subprocess.run(["pkill", "-f", "sleep 1000.5"], check=False)


def test_torch_ddp_fashion_mnist_trains_through_cli(server, agent_factory, cli, tmp_path):
    agent_factory(cpus=2)
    spec = {"name": "ddp", "entrypoint": [PY, "examples/torch_fashion_mnist/train.py"],
            "working_dir": os.path.abspath(harness.SOURCE_DIR), "backend": "torch",
            "train_loop_config": {"epochs": 1, "limit_train": 6000, "limit_test": 1000},
            "scaling_config": {"num_workers": 2}}
    import json
    path = tmp_path / "job.json"
    path.write_text(json.dumps(spec))
    r = cli("submit", str(path), "--wait", "--wait-timeout", "600", timeout=700)
    job_id = r.stdout.strip().splitlines()[0]
    job = server.request("GET", f"/api/v1/jobs/{job_id}").json
    assert r.returncode == 0, (r.stdout, r.stderr, job)
    assert job["status"] == "SUCCEEDED"


def test_node_shows_what_its_live_workers_hold_and_zero_once_they_end(server, agent_factory):
    a = agent_factory(cpus=8, memory_mb=4096, gpus="0,1,2,3")

    def allocated():
        return server.request("GET", f"/api/v1/nodes/{a.node_id}").json["allocated"]

    listed = server.request("GET", "/api/v1/nodes").json["nodes"]
    assert [n["allocated"] for n in listed if n["id"] == a.node_id] == [
        {"cpu": 0, "memory_mb": 0, "gpu": 0}]
    job = server.submit({"entrypoint": ["sleep", "300"],
                         "scaling_config": {"num_workers": 2, "use_gpu": True,
                                            "resources_per_worker": {"CPU": 1.5, "GPU": 1,
                                                                     "memory_mb": 100}}})["id"]
    server.wait_job(job, {"RUNNING"})
    assert allocated() == {"cpu": 3, "memory_mb": 200, "gpu": 2}
    listed = server.request("GET", "/api/v1/nodes").json["nodes"]
    assert [n["allocated"] for n in listed if n["id"] == a.node_id] == [allocated()]
    assert server.request("POST", f"/api/v1/jobs/{job}/stop", {}).status == 202
    server.wait_job(job, {"STOPPED"})
    assert allocated() == {"cpu": 0, "memory_mb": 0, "gpu": 0}
