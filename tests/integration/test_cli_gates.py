"""CI quality gates (issue 15): `trainyard submit FILE --wait --assert 'accuracy>=0.85'` exits
0 when the job's final rank-0 metrics pass, and non-zero (6) naming the metric and its value
when they miss. Real server, agent, workers and CLI, submitting a working directory as a CI
runner would."""
import json

import harness

TRAIN = """\
import trainyard
for step in range(3):
    trainyard.report({"accuracy": 0.5 + 0.2 * step, "loss": 1.0 / (step + 1), "step": step})
"""


def project(tmp_path):
    d = tmp_path / "repo"
    d.mkdir()
    (d / "train.py").write_text(TRAIN)
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps({"name": "gated", "entrypoint": ["/usr/bin/python3", "train.py"],
                                "scaling_config": {"num_workers": 2}}))
    return str(d), str(spec)


def test_gates_that_pass_exit_zero(server, agent_factory, cli, tmp_path):
    agent_factory(cpus=2)
    d, spec = project(tmp_path)
    r = cli("submit", spec, "--working-dir", d, "--wait", "--assert", "accuracy>=0.85",
            "--assert", "loss < 0.5")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "quality gates passed (2)" in r.stderr, r.stderr


def test_a_missed_gate_exits_six_naming_the_metric_and_its_value(server, agent_factory, cli,
                                                                 tmp_path):
    agent_factory(cpus=2)
    d, spec = project(tmp_path)
    r = cli("submit", spec, "--working-dir", d, "--wait", "--assert", "accuracy>=0.95",
            "--assert", "loss<0.5", "--assert", "f1>0")
    assert r.returncode == 6, r.stdout + r.stderr
    assert "quality gate missed: accuracy >= 0.95: accuracy is 0.9" in r.stderr, r.stderr
    assert "f1 > 0: the final rank-0 metrics have no 'f1'" in r.stderr, r.stderr
    assert "loss" not in r.stderr.replace("--", ""), r.stderr


def test_malformed_gate_is_a_usage_error_before_anything_is_submitted(server, cli, tmp_path):
    d, spec = project(tmp_path)
    r = cli("submit", spec, "--wait", "--assert", "accuracy about 0.9")
    assert r.returncode == 2 and "NAME OP NUMBER" in r.stderr, r.stderr
    r = cli("submit", spec, "--assert", "accuracy>=0.9")
    assert r.returncode == 2 and "only makes sense with --wait" in r.stderr, r.stderr
    assert server.request("GET", "/api/v1/jobs").json["jobs"] == []
