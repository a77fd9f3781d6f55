"""Safe unpacking (issue 22, findings 1 and 10): a code or checkpoint package is unpacked with
libarchive by a process running as the job's uid, regular files, directories and links inside the
tree only, modes masked, within --unpack-max-bytes and --unpack-max-entries. Each package here is
built by the test with Python's tarfile, as a hostile user would; the job must fail naming the
entry (or the cap), and nothing of a bad type, nor anything outside the tree, may exist
afterwards. Real server, agent (workers under uids of their own) and workers."""
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import uuid

import pytest

import harness
from test_artifacts import wait_artifacts
from test_resume import READER, run_script
from test_storage_path import part_dir, shared, stop_all, submit_worker  # noqa: F401 (fixture)

PY = "/usr/bin/python3"
ISOLATED = {"TRAINYARD_AGENT_RUN_AS": "auto"}

# The package's program: says it ran, and what it finds (for the packages that may run).
PROBE = ("import json, os, stat\n"
         "out = {}\n"
         "for r, ds, fs in os.walk('.'):\n"
         "    for n in ds + fs:\n"
         "        p = os.path.join(r, n)\n"
         "        st = os.lstat(p)\n"
         "        out[os.path.relpath(p, '.')] = [st.st_mode, st.st_uid]\n"
         "print('RAN', json.dumps({'uid': os.getuid(), 'entries': out}), flush=True)\n")


def add(tar, name, data=b"", **attrs):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = attrs.pop("mode", 0o644)
    for k, v in attrs.items():
        setattr(info, k, v)
    tar.addfile(info, io.BytesIO(data) if data else None)


def package(*entries):
    """A tar.gz holding main.py (PROBE) and then each (name, data, attrs) entry."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as tar:
        add(tar, "main.py", PROBE.encode())
        for name, data, attrs in entries:
            add(tar, name, data, **attrs)
    return raw.getvalue()


def upload(srv, data):
    sha = hashlib.sha256(data).hexdigest()
    r = srv.request("PUT", f"/api/v1/code/{sha}?offset=0", body=data,
                    headers={"X-Content-SHA256": sha, "Content-Type": "application/octet-stream"})
    assert r.status == 200, r
    r = srv.request("POST", f"/api/v1/code/{sha}/complete", body={})
    assert r.status == 200 and r.json["state"] == "complete", r
    return sha


def run(srv, data, as_checkpoint=False):
    """Runs a job from package `data` (as its code, or as the checkpoint it resumes from);
    returns (final job, its logs)."""
    sha = upload(srv, data)
    spec = {"name": "unpack", "entrypoint": [PY, "main.py"],
            "scaling_config": {"num_workers": 1}}
    if as_checkpoint:
        spec["entrypoint"] = [PY, "-c", "import os; os.chdir(os.environ['TRAINYARD_CHECKPOINT_DIR']);"
                              " exec(open('main.py').read())"]
        spec["resume_from_package"] = sha
    else:
        spec["code_package"] = sha
    job = srv.submit(spec)["id"]
    done = srv.wait_job(job, {"SUCCEEDED", "FAILED"})
    r = srv.request("GET", f"/api/v1/jobs/{job}/logs")
    return done, r.text if r.status == 200 else ""


def bad_types_under(root):
    """Entries under root that are neither regular files, directories nor symbolic links, or
    carry a setuid, setgid or sticky bit."""
    bad = []
    for r, ds, fs in os.walk(root):
        for n in ds + fs:
            p = os.path.join(r, n)
            m = os.lstat(p).st_mode
            if not (stat.S_ISREG(m) or stat.S_ISDIR(m) or stat.S_ISLNK(m)) or m & 0o7000:
                bad.append((p, oct(m)))
    return bad


def assert_refused(agent, done, logs, *needles):
    text = json.dumps(done)
    assert done["status"] == "FAILED", done
    for n in needles:
        assert n in text, (n, text)
    assert "RAN" not in logs, logs  # the worker never ran on a bad tree
    assert bad_types_under(os.path.join(agent.data_dir, "code")) == []
    run_dir = os.path.join(agent.data_dir, "code", "run", str(done["id"]))
    assert not os.path.exists(run_dir) or os.listdir(run_dir) == [], os.listdir(run_dir)


@pytest.fixture(scope="module")
def server(module_server_factory):
    """One server for the file's tests (conftest.py): each makes its own jobs."""
    return module_server_factory()


def test_code_package_with_device_nodes_fails_its_job_and_creates_none(server, agent_factory):
    agent = agent_factory(cpus=2, env=ISOLATED)
    for kind, major, minor, what in ((tarfile.CHRTYPE, 1, 5, "a character device"),
                                     (tarfile.BLKTYPE, 7, 0, "a block device")):
        data = package(("dev/node", b"", {"type": kind, "devmajor": major, "devminor": minor,
                                          "mode": 0o666}))
        done, logs = run(server, data)
        assert_refused(agent, done, logs, "code package entry 'dev/node' is " + what)


def test_code_package_with_a_fifo_fails_its_job(server, agent_factory):
    agent = agent_factory(cpus=2, env=ISOLATED)
    done, logs = run(server, package(("pipe", b"", {"type": tarfile.FIFOTYPE, "mode": 0o666})))
    assert_refused(agent, done, logs, "code package entry 'pipe' is a FIFO")


def test_code_package_modes_are_masked_and_the_tree_is_the_jobs(server, agent_factory):
    # setuid, setgid, sticky and world-writable bits are dropped; a link inside the tree is kept;
    # everything unpacked belongs to the worker's uid (it was written by it, not chowned).
    agent = agent_factory(cpus=2, env=ISOLATED)
    data = package(("suid", b"#!/bin/sh\n", {"mode": 0o6777}),
                   ("shared", b"", {"type": tarfile.DIRTYPE, "mode": 0o3777}),
                   ("shared/f", b"x", {"mode": 0o666}),
                   ("link", b"", {"type": tarfile.SYMTYPE, "linkname": "shared/f"}))
    done, logs = run(server, data)
    assert done["status"] == "SUCCEEDED", (json.dumps(done), logs)
    out = json.loads(logs.split("RAN ", 1)[1].splitlines()[0])
    uid, entries = out["uid"], out["entries"]
    assert uid != 0
    assert stat.S_IMODE(entries["suid"][0]) == 0o755, oct(entries["suid"][0])
    assert stat.S_IMODE(entries["shared"][0]) == 0o755, oct(entries["shared"][0])
    assert stat.S_IMODE(entries["shared/f"][0]) == 0o644, oct(entries["shared/f"][0])
    assert stat.S_ISLNK(entries["link"][0])
    assert {e[1] for e in entries.values()} == {uid}, entries


def test_code_package_with_hard_links_to_host_files_fails_its_job(server, agent_factory):
    agent = agent_factory(cpus=2, env=ISOLATED)
    links_before = os.stat("/etc/shadow").st_nlink
    for target in ("/etc/shadow", "../../../../../../etc/shadow", "main.py"):
        done, logs = run(server, package(("shadow", b"", {"type": tarfile.LNKTYPE,
                                                           "linkname": target})))
        assert_refused(agent, done, logs, "code package entry 'shadow' is a hard link")
    assert os.stat("/etc/shadow").st_nlink == links_before


def test_code_package_with_a_link_out_of_the_tree_fails_and_writes_nothing_there(server,
                                                                                agent_factory):
    agent = agent_factory(cpus=2, env=ISOLATED)
    marker = f"trainyard-unpack-{uuid.uuid4().hex}"
    for link, target in (("etc", "/etc"), ("up", "../../../../../../../../etc"),
                         ("sub/up", "../x")):
        name = link.split("/")[-1]
        data = package((link, b"", {"type": tarfile.SYMTYPE, "linkname": target}),
                       (f"{link}/{marker}", b"owned", {}))
        done, logs = run(server, data)
        assert_refused(agent, done, logs,
                       f"code package entry '{link}' is a symbolic link to '{target}'")
        assert name
    assert not os.path.exists(os.path.join("/etc", marker))


def test_code_package_with_names_leaving_the_tree_fails_and_writes_nothing_there(server,
                                                                               agent_factory):
    agent = agent_factory(cpus=2, env=ISOLATED)
    marker = f"/tmp/trainyard-unpack-{uuid.uuid4().hex}"
    for name, needle in (("../../../../../../../.." + marker, "climbs out of the package"),
                         ("a/../../" + os.path.basename(marker), "climbs out of the package"),
                         (marker, "has an absolute name")):
        done, logs = run(server, package((name, b"owned", {})))
        assert_refused(agent, done, logs, f"code package entry '{name}' {needle}")
    assert not os.path.exists(marker)
    assert not os.path.exists(os.path.join(agent.data_dir, "code", "run",
                                           os.path.basename(marker)))


def test_tar_bomb_stops_at_the_unpack_cap_and_fails_its_job(server, agent_factory):
    # 256 MiB of zeros gzip to about 250 KiB; the agent's cap is 16 MiB.
    agent = agent_factory(cpus=2, env=ISOLATED, extra_args=["--unpack-max-bytes", "16777216",
                                                            "--unpack-max-entries", "100"])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        add(tar, "main.py", PROBE.encode())
        info = tarfile.TarInfo("zeros.bin")
        info.size = 256 << 20
        tar.addfile(info, io.BytesIO(bytes(info.size)))
    bomb = gzip.compress(raw.getvalue(), compresslevel=9)
    assert len(bomb) < 1 << 20
    done, logs = run(server, bomb)
    assert_refused(agent, done, logs,
                   "code package unpacks to more than 16 MiB (--unpack-max-bytes)")
    # Many small entries: the entry cap.
    done, logs = run(server, package(*[(f"f{i}", b"", {}) for i in range(150)]))
    assert_refused(agent, done, logs,
                   "code package holds more than 100 entries (--unpack-max-entries)")


def test_checkpoint_package_gets_the_same_rules(server, agent_factory):
    # resume_from_package takes the same path: its device node fails the job too.
    agent = agent_factory(cpus=2, env=ISOLATED)
    data = package(("dev/node", b"", {"type": tarfile.CHRTYPE, "devmajor": 1, "devminor": 5,
                                      "mode": 0o666}))
    done, logs = run(server, data, as_checkpoint=True)
    assert_refused(agent, done, logs, "checkpoint package entry 'dev/node' is a character device")


REPORTER = ("import json, sys, trainyard\n"
            "build = trainyard._build_report\n"
            "def unchecked(metrics, checkpoint):\n"  # the agent, not the SDK, must refuse it
            "    msg = build(metrics, None)\n"
            "    msg['checkpoint_dir'] = checkpoint\n"
            "    return msg\n"
            "trainyard._build_report = unchecked\n"
            "try:\n"
            "    trainyard.report({'loss': 1.0}, checkpoint=sys.argv[1])\n"
            "    print('TAKEN', flush=True)\n"
            "except trainyard.TrainyardError as e:\n"
            "    print('REFUSED', json.dumps(str(e)), flush=True)\n")


def test_checkpoint_dir_errors_name_nothing_the_worker_cannot_read(server, agent_factory,
                                                                    tmp_path):
    # Finding 17: the agent (root) checks a reported checkpoint_dir. A directory the worker cannot
    # read must get the same reply as one that does not exist, and nothing inside it is named.
    agent_factory(cpus=2, env=ISOLATED)
    secret = tmp_path / "root-only"
    secret.mkdir(mode=0o700)
    (secret / "secret-name.bin").write_text("s")
    os.chmod(tmp_path, 0o711)
    missing = tmp_path / "missing"
    sha = upload(server, package(("r.py", REPORTER.encode(), {})))
    replies = {}
    for path in (secret, missing):
        job = server.submit({"name": "probe", "entrypoint": [PY, "r.py", str(path)],
                             "code_package": sha, "scaling_config": {"num_workers": 1}})["id"]
        server.wait_job(job, {"SUCCEEDED", "FAILED"})
        logs = server.request("GET", f"/api/v1/jobs/{job}/logs").text
        assert "REFUSED " in logs, logs
        replies[path] = json.loads(logs.split("REFUSED ", 1)[1].splitlines()[0])
    assert "secret-name" not in replies[secret], replies
    assert (replies[secret].replace(str(secret), "P") ==
            replies[missing].replace(str(missing), "P")), replies


def test_checkpoint_copied_from_a_storage_path_keeps_only_files_and_directories(shared):  # noqa: F811
    # The files of a checkpoint on a storage_path belong to the uid its job ran under, which may
    # leave links, FIFOs and setuid bits there afterwards: a node resuming from it copies only
    # regular files and directories, modes masked.
    srv, root = shared
    storage = os.path.join(root, "hostile")
    agents = []
    try:
        a = harness.Agent(srv, cpus=2).start()
        agents.append(a)
        job = submit_worker(srv, storage, "hostile-writer")
        assert srv.wait_job(job, {"SUCCEEDED", "FAILED"})["status"] == "SUCCEEDED"
        last = next(c for c in wait_artifacts(srv, job, 3) if c["index"] == 3)
        part = part_dir(storage, job, 3, a.node_id)
        os.symlink("/etc/shadow", os.path.join(part, "leak"))
        os.mkfifo(os.path.join(part, "pipe"))
        suid = os.path.join(part, "sub", "suid")
        with open(suid, "w") as f:
            f.write("x")
        os.chmod(suid, 0o4755)
        assert srv.request("POST", f"/api/v1/nodes/{a.node_id}/drain").status == 200
        b = harness.Agent(srv, cpus=2).start()
        agents.append(b)
        _, _, done = run_script(srv, READER, "hostile-reader", 2,
                                resume_from_checkpoint=last["id"])
        assert done["status"] == "SUCCEEDED", (done, b.log_text())
        assert "copied from shared storage" in b.log_text(), b.log_text()
        cache = os.path.join(os.path.realpath(b.data_dir), "checkpoints", "fetched",
                             last["artifact"]["sha256"])
        assert os.path.isfile(os.path.join(cache, "rank-0.txt"))
        assert os.path.isfile(os.path.join(cache, "sub", "suid"))
        assert not os.path.lexists(os.path.join(cache, "leak"))
        assert not os.path.lexists(os.path.join(cache, "pipe"))
        assert bad_types_under(cache) == []
    finally:
        stop_all(agents)
