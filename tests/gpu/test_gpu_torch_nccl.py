"""On a real GPU (label `gpu`, gated by gpu_gate.py): the PyTorch example with nccl on the GPU
Trainyard gives it (one worker: one GPU cannot hold two NCCL ranks), to the example's bar."""
import os
import re
import sys

import harness

PY = sys.executable  # the python3 with PyTorch that runs the test


def test_torch_example_trains_with_nccl_on_the_gpu(server, agent_factory):
    agent_factory(args=["--cpus", "4"]).wait_node()
    job = server.submit({"entrypoint": [PY, "examples/torch_fashion_mnist/train.py"],
                         "working_dir": os.path.abspath(harness.SOURCE_DIR),
                         "train_loop_config": {"epochs": 2, "batch_size": 128, "lr": 0.05},
                         "scaling_config": {"num_workers": 1, "use_gpu": True}})
    done = server.wait_job(job["id"], {"SUCCEEDED", "FAILED"}, timeout=600)
    logs = server.request("GET", f"/api/v1/jobs/{job['id']}/logs", timeout=120).text
    print(logs[-2000:])
    assert done["status"] == "SUCCEEDED", done
    m = re.search(r"final test accuracy: ([0-9.]+) \(cuda:0, nccl\)", logs)
    assert m and float(m.group(1)) >= 0.84, logs[-2000:]
