"""Unit tests of trainyard.train's pure parts: packing a working directory (excludes,
determinism, the size cap), naming the training function, building the job spec, quality
gates, dataset shards. No server: see tests/integration/test_python_train.py for fit()."""
import gzip
import io
import json
import os
import sys
import tarfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "worker", "python"))

from trainyard.train import (CheckpointConfig, FailureConfig, MetricAssertionError,  # noqa: E402
                             RunConfig, ScalingConfig, check_assertions, get_dataset_shard)
from trainyard.train._pack import (PackageTooLarge, directory_signature, list_files,  # noqa: E402
                                  pack_directory, remember_package, remembered_package)
from trainyard.train._trainer import (FUNCTION_FILE, RUNNER, build_spec,  # noqa: E402
                                      function_reference, script_defines)


def tree(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def names(root):
    return [rel for rel, full in list_files(root) if not os.path.isdir(full)]


def test_vcs_pycache_and_gitignore_patterns_are_left_out(tmp_path):
    tree(tmp_path, {"train.py": "", ".git/HEAD": "", "__pycache__/a.pyc": "", "m.pyc": "",
                    ".gitignore": "*.bin\nlogs/\n/top.txt\n# comment\n!keep.bin\n",
                    "w.bin": "", "logs/a": "", "sub/logs": "a file, not a directory",
                    "top.txt": "", "sub/top.txt": ""})
    assert names(tmp_path) == ["sub/logs", "sub/top.txt", "train.py"]


def test_trainyardignore_and_nested_gitignore_apply_to_their_directory(tmp_path):
    tree(tmp_path, {".trainyardignore": "data/raw\n", "data/raw/x": "", "data/ok": "",
                    "pkg/.gitignore": "*.tmp\n", "pkg/a.tmp": "", "b.tmp": "", "pkg/m.py": ""})
    assert names(tmp_path) == [".trainyardignore", "b.tmp", "data/ok", "pkg/m.py"]


def test_package_is_the_same_bytes_while_files_are_and_differs_after_a_change(tmp_path):
    tree(tmp_path, {"a.py": "x = 1\n", "d/b.txt": "b"})
    one = pack_directory(tmp_path)
    os.utime(tmp_path / "a.py", (1, 1))  # times do not count
    assert pack_directory(tmp_path) == one
    (tmp_path / "a.py").write_text("x = 2\n")
    assert pack_directory(tmp_path) != one
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(one))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert sorted(members) == ["a.py", "d", "d/b.txt"]
    assert all(m.mtime == 0 and m.uid == 0 for m in members.values())


def test_package_over_the_cap_is_refused_naming_the_cap(tmp_path):
    (tmp_path / "big").write_bytes(os.urandom(200_000))
    with pytest.raises(PackageTooLarge, match="more than 100000 bytes"):
        pack_directory(tmp_path, max_bytes=100_000)


def module_level(config):
    return config


def test_function_reference_names_a_module_function_and_sends_the_others_by_value(tmp_path):
    here = os.path.dirname(os.path.abspath(__file__))
    assert function_reference(module_level, here) == {
        "module": module_level.__module__, "qualname": "module_level"}
    # working_dir elsewhere: the workers could not import this module, so the function (and
    # the module's code it needs) travels by value.
    assert function_reference(module_level, str(tmp_path)) == {"pickled": FUNCTION_FILE}
    assert function_reference(lambda c: c, str(tmp_path)) == {"pickled": FUNCTION_FILE}
    k = 3

    def nested(config):
        return config + k
    assert function_reference(nested, str(tmp_path)) == {"pickled": FUNCTION_FILE}
    with pytest.raises(ValueError, match="must be a function"):
        function_reference(42, str(tmp_path))


def test_script_defines_reads_what_an_import_binds(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("def top(c): pass\n"
                      "try:\n    alias = top\nexcept Exception:\n    pass\n"
                      "if __name__ == '__main__':\n    def guarded(c): pass\n"
                      "else:\n    def imported(c): pass\n")
    assert [n for n in ("top", "alias", "guarded", "imported", "missing")
            if script_defines(str(script), n)] == ["top", "alias", "imported"]


def test_spec_carries_scaling_run_config_and_the_function(tmp_path):
    run = RunConfig(name="exp", checkpoint_config=CheckpointConfig(
        num_to_keep=2, checkpoint_score_attribute="acc", checkpoint_score_order="max"),
        failure_config=FailureConfig(max_failures=3))
    spec = build_spec("exp", "torch", RUNNER, ScalingConfig(num_workers=4, use_gpu=True),
                      run, {"lr": 0.1}, {"file": "train.py", "qualname": "f"})
    assert spec["entrypoint"][:3] == ["python3", "-m", "trainyard.train._runner"]
    assert json.loads(spec["entrypoint"][3]) == {"file": "train.py", "qualname": "f",
                                                 "backend": "torch", "name": "exp"}
    assert spec["scaling_config"] == {"num_workers": 4, "use_gpu": True,
                                      "placement_strategy": "PACK"}
    assert spec["run_config"] == {"checkpoint_config": {"num_to_keep": 2,
                                                        "checkpoint_score_attribute": "acc",
                                                        "checkpoint_score_order": "max"},
                                  "failure_config": {"max_failures": 3}}
    assert spec["train_loop_config"] == {"lr": 0.1} and spec["backend"] == "torch"
    with pytest.raises(ValueError, match="num_workers"):
        ScalingConfig(num_workers=0).to_spec()
    with pytest.raises(ValueError, match="resume_from_checkpoint"):
        build_spec("e", "none", ["true"], ScalingConfig(), RunConfig(), None,
                   resume_from="/a/local/dir")


def test_quality_gates_name_the_metric_and_its_value():
    check_assertions({"accuracy": 0.9, "loss": 0.3}, ["accuracy>=0.85", "loss<0.5"])
    with pytest.raises(MetricAssertionError) as e:
        check_assertions({"accuracy": 0.8, "loss": 0.3}, ["accuracy>=0.85", "loss<0.5", "f1>0"])
    assert "accuracy>=0.85: accuracy is 0.8" in str(e.value)
    assert "no 'f1'" in str(e.value) and "loss is" not in str(e.value)
    with pytest.raises(ValueError, match="NAME OP NUMBER"):
        check_assertions({}, ["accuracy ~ 1"])


def test_dataset_shard_takes_every_world_size_th_item():
    assert get_dataset_shard(list(range(7)), rank=1, world_size=3) == [1, 4]
    assert get_dataset_shard(range(4), rank=0, world_size=2) == range(0, 4, 2)


def test_signature_changes_with_content_size_or_time_and_is_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = tmp_path / "w"
    tree(d, {"a.py": "x = 1\n", ".gitignore": "*.log\n"})
    sig = directory_signature(d)
    (d / "run.log").write_text("ignored files do not count")
    assert directory_signature(d) == sig
    os.utime(d / "a.py", ns=(1, 1))
    touched = directory_signature(d)
    assert touched != sig
    (d / "a.py").write_text("x = 22\n")
    assert directory_signature(d) not in (sig, touched)
    assert remembered_package(sig) is None
    remember_package(sig, "ab" * 32)
    assert remembered_package(sig) == "ab" * 32


def test_checkpoint_package_keeps_every_file_and_extra_files_are_added(tmp_path):
    tree(str(tmp_path), {"w.bin": "w", ".gitignore": "*\n", "__pycache__/x.pyc": "c"})
    with tarfile.open(fileobj=io.BytesIO(pack_directory(str(tmp_path), keep_all=True))) as t:
        assert sorted(t.getnames()) == [".gitignore", "__pycache__", "__pycache__/x.pyc", "w.bin"]
    extra = {"__trainyard_datasets__.pkl": b"data"}
    with tarfile.open(fileobj=io.BytesIO(pack_directory(str(tmp_path), extra=extra))) as t:
        assert sorted(t.getnames()) == ["__trainyard_datasets__.pkl"]
        assert t.extractfile("__trainyard_datasets__.pkl").read() == b"data"
    assert directory_signature(str(tmp_path), extra) != directory_signature(str(tmp_path))
    spec = build_spec("e", "none", ["true"], ScalingConfig(), RunConfig(), None,
                      resume_package="ab" * 32)
    assert spec["resume_from_package"] == "ab" * 32 and "resume_from_checkpoint" not in spec


def test_named_dataset_shards_are_disjoint_and_cover(monkeypatch):
    from trainyard.train import _session
    monkeypatch.setattr(_session, "_datasets", {"ids": list(range(7))})
    shards = [get_dataset_shard("ids", rank=r, world_size=3) for r in range(3)]
    assert sorted(sum(shards, [])) == list(range(7))
    assert shards[0] == [0, 3, 6]
    with pytest.raises(KeyError, match="given: ids"):
        get_dataset_shard("other", rank=0, world_size=1)
