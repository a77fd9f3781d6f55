"""The Python package spells the vocabulary as common/vocab.h does: every list of
trainyard.train._vocab equals the C one, as vocab-dump wrote it at build time
(<build>/vocab/vocab.json, $TY_VOCAB_JSON). And the dashboard's sources spell no status: they
import them from the generated module `vocab`."""
import glob
import json
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))

from trainyard.train import _vocab  # noqa: E402
from trainyard.train import CheckpointConfig, ScalingConfig  # noqa: E402
from trainyard.train._trainer import DataParallelTrainer  # noqa: E402
from trainyard.train.tensorflow import TensorflowTrainer  # noqa: E402
from trainyard.train.torch import TorchTrainer  # noqa: E402


def c_vocab():
    with open(os.environ["TY_VOCAB_JSON"]) as f:
        return json.load(f)


def test_every_python_list_is_the_c_list():
    c = c_vocab()
    pairs = {"job_statuses": _vocab.JOB_STATUSES,
             "terminal_job_statuses": _vocab.TERMINAL_JOB_STATUSES,
             "backends": _vocab.BACKENDS,
             "placement_strategies": _vocab.PLACEMENT_STRATEGIES,
             "checkpoint_score_orders": _vocab.CHECKPOINT_SCORE_ORDERS}
    for key, python in pairs.items():
        assert list(python) == c[key], f"{key}: Python {list(python)}, C {c[key]}"


def test_every_named_constant_is_a_c_name():
    c = c_vocab()
    lists = {"JOB_": c["job_statuses"], "BACKEND_": c["backends"],
             "SCORE_": c["checkpoint_score_orders"]}
    named = [(k, v) for k, v in vars(_vocab).items() if k.isupper() and isinstance(v, str)]
    assert len(named) >= 14
    for name, value in named:
        prefix = next(p for p in lists if name.startswith(p))
        assert value in lists[prefix], f"{name} = {value!r} is not one of {lists[prefix]}"


def test_defaults_and_trainer_backends_are_the_c_ones():
    c = c_vocab()
    assert ScalingConfig().to_spec()["placement_strategy"] == c["placement_strategies"][0]
    assert CheckpointConfig().to_spec()["checkpoint_score_order"] == \
        c["checkpoint_score_orders"][0]
    for trainer in (DataParallelTrainer, TorchTrainer, TensorflowTrainer):
        assert trainer._backend in c["backends"], trainer


def test_dashboard_sources_spell_no_status():
    c = c_vocab()
    names = set().union(*(c[k] for k in ("job_statuses", "worker_statuses", "node_statuses",
                                         "checkpoint_statuses")))
    alternatives = r"(?<![A-Za-z0-9_])(" + "|".join(sorted(names)) + r")(?![A-Za-z0-9_])"
    # Scripts in the API's spelling; style sheets and pages in any case (class names such as
    # "s-running" were the old way to colour a status).
    word = {"js": re.compile(alternatives), "css": re.compile(alternatives, re.IGNORECASE),
            "html": re.compile(alternatives, re.IGNORECASE)}
    sources = [p for ext in word
               for p in glob.glob(os.path.join(ROOT, "web", "src", "**", "*." + ext), recursive=True)]
    assert len(sources) >= 6
    found = []
    for path in sources:
        pattern = word[path.rsplit(".", 1)[1]]
        with open(path) as f:
            for n, line in enumerate(f, 1):
                found += [f"{os.path.relpath(path, ROOT)}:{n}: {m}" for m in pattern.findall(line)]
    assert not found, "spelled by hand (import it from 'vocab'):\n" + "\n".join(found)
