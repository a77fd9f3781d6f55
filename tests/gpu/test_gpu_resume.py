"""On a real GPU (label `gpu`, gated by gpu_gate.py): the CUDA example and the CPU example write
the same checkpoint, so training resumes across them both ways (epoch 1 on one, epoch 2 on the
other) and reaches the CPU example's bar (0.85 after 2 epochs)."""
import glob
import json
import os
import subprocess

import harness

CPU = os.path.join(harness.BUILD_DIR, "examples", "fashion_mnist", "fashion_mnist")
GPU = os.path.join(harness.BUILD_DIR, "examples", "fashion_mnist_cuda", "fashion_mnist_cuda")


def run(binary, root, **cfg):
    path = os.path.join(root, f"cfg-{len(os.listdir(root))}.json")
    with open(path, "w") as f:
        json.dump({"checkpoint_every": 1, "checkpoint_root": root, **cfg}, f)
    p = subprocess.run([binary, "--config", path], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, CUDA_VISIBLE_DEVICES="0"))
    print(binary, p.returncode, p.stdout[-1500:], p.stderr[-1500:])
    assert p.returncode == 0, p.stderr
    return p.stdout + p.stderr


def one_epoch_then_resume(first, second):
    root = harness.make_tmpdir("ty-resume-")
    run(first, root, epochs=1)
    ckpts = glob.glob(os.path.join(root, "*", "model.bin"))
    assert len(ckpts) == 1, ckpts
    out = run(second, root, epochs=2, resume_from=os.path.dirname(ckpts[0]), min_accuracy=0.85)
    assert "resumed from" in out and "epoch 2/2" in out, out


def test_gpu_checkpoint_resumes_on_cpu():
    one_epoch_then_resume(GPU, CPU)


def test_cpu_checkpoint_resumes_on_gpu():
    one_epoch_then_resume(CPU, GPU)
