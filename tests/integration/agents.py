"""trainyard-agent processes for the integration tests: each agent gets its own temp data dir,
joins the given server with its cluster token, and must exit 0 after SIGTERM at teardown."""
import json
import os
import signal
import subprocess
import time

import harness

# TY_AGENT_BIN runs another build of the agent (e.g. the ASan one) against the harness server;
# TY_AGENT_WRAPPER prefixes its command line (e.g. "valgrind --error-exitcode=99").
AGENT_BIN = os.environ.get("TY_AGENT_BIN") or harness.AGENT_BIN
AGENT_WRAPPER = os.environ.get("TY_AGENT_WRAPPER", "").split()


def cluster_token(server):
    path = os.path.join(server.data_dir, "cluster.token")
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return None


class Agent:
    """One trainyard-agent process (restartable on the same data dir)."""

    def __init__(self, server, data_dir=None, args=(), env=None):
        root = harness.make_tmpdir("ty-agent-")
        self.data_dir = data_dir or os.path.join(root, "data")
        self.log_path = os.path.join(root, "agent.log")
        self.server = server
        self.args = list(args)
        self.env = dict(os.environ, **(env or {}))
        self.proc = None
        self.log = None
        self.log_start = 0

    def start(self, server=None, token="cluster"):
        """Starts the agent; token "cluster" joins with the server's cluster token."""
        self.server = server or self.server
        if token == "cluster":
            token = cluster_token(self.server)
        if "--port-range" not in self.args:
            self.args += ["--port-range", harness.port_range()]
        self.port_range = self.args[self.args.index("--port-range") + 1]
        cmd = [*AGENT_WRAPPER, AGENT_BIN, "--server", self.server.ws_url, "--data-dir", self.data_dir,
               *self.args]
        if token:
            cmd += ["--token", token]
        self.log = open(self.log_path, "ab")
        self.log_start = self.log.tell()
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=self.env)
        return self

    @property
    def node_id(self):
        if "--node-id" in self.args:
            return self.args[self.args.index("--node-id") + 1]
        deadline = time.time() + 10
        path = os.path.join(self.data_dir, "node-id")
        while time.time() < deadline:
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    return text
            time.sleep(0.05)
        raise AssertionError(f"agent wrote no node-id:\n{self.log_text()}")

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-8000:]
        except OSError:
            return ""

    def worker_log(self, job_id, attempt, rank):
        path = os.path.join(self.data_dir, "logs", str(job_id), str(attempt), f"rank-{rank}.log")
        with open(path) as f:
            return f.read()

    def registered(self):
        """Whether the running process has been accepted by the server."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                return b"registered with" in f.read()
        except OSError:
            return False

    def wait_node(self, statuses=("ALIVE",), timeout=20):
        """Polls GET /api/v1/nodes until this agent's node has one of `statuses` (for ALIVE: and
        the running agent process has registered)."""
        node_id = self.node_id
        deadline = time.time() + timeout
        while "ALIVE" in statuses and self.proc and self.proc.poll() is None \
                and not self.registered() and time.time() < deadline:
            time.sleep(0.05)
        node = None
        while time.time() < deadline:
            r = self.server.request("GET", "/api/v1/nodes")
            if r.status == 200:
                node = next((n for n in r.json["nodes"] if n["id"] == node_id), None)
                if node and node["status"] in statuses:
                    return node
            time.sleep(0.1)
        raise AssertionError(f"node {node_id} not in {statuses} after {timeout}s: {node}\n"
                             f"agent log:\n{self.log_text()}\nserver log:\n"
                             f"{self.server.log_text()}")

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._close_log()

    def stop(self, timeout=30):
        """SIGTERM; returns the exit code (0 after a clean shutdown)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._close_log()
                raise AssertionError(f"agent ignored SIGTERM for {timeout}s:\n{self.log_text()}")
        self._close_log()
        return self.proc.returncode

    def _close_log(self):
        if self.log:
            self.log.close()
            self.log = None


def processes_in_group(pgid):
    """Live (non-zombie) processes whose process group is `pgid`, from /proc."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state, pg = fields[0], int(fields[2])
        if pg == pgid and state != "Z":
            found.append(int(name))
    return found


def read_env_file(path, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


def dumps(obj):
    return json.dumps(obj, sort_keys=True)
