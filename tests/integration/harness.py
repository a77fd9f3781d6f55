"""Test harness: a real PostgreSQL cluster, real trainyard-server processes, the real CLI.

Everything runs on this machine: PostgreSQL on a private unix socket (as the `postgres` user when
the tests run as root), servers on free loopback ports. Nothing is mocked.
"""
import contextlib
import fcntl
import importlib.util
import json
import os
import pwd
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pgwire


def _load_vocab():
    """The Python package's names of common/vocab.h (tests/unit/python/test_vocab.py holds
    them to the C ones), read from its file without importing the package."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker",
                        "python", "trainyard", "train", "_vocab.py")
    spec = importlib.util.spec_from_file_location("ty_vocab", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VOCAB = _load_vocab()

BUILD_DIR = os.environ.get("TY_BUILD_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "build")
SOURCE_DIR = os.environ.get("TY_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
SERVER_BIN = os.path.join(BUILD_DIR, "server", "trainyard-server")
CLI_BIN = os.path.join(BUILD_DIR, "cli", "trainyard")
# TY_AGENT_BIN runs another build of the agent (e.g. the ASan one) against the harness server;
# TY_AGENT_WRAPPER prefixes its command line (e.g. "valgrind --error-exitcode=99").
AGENT_BIN = os.environ.get("TY_AGENT_BIN") or os.path.join(BUILD_DIR, "worker", "agent",
                                                          "trainyard-agent")
AGENT_WRAPPER = os.environ.get("TY_AGENT_WRAPPER", "").split()


def pg_bin_dir():
    """PostgreSQL's server binaries: $TY_PG_BIN_DIR (e.g. an unpacked bundle, scripts/gpu-run.sh)
    or the newest under /usr/lib/postgresql."""
    if os.environ.get("TY_PG_BIN_DIR"):
        return os.environ["TY_PG_BIN_DIR"]
    base = "/usr/lib/postgresql"
    versions = sorted((int(v) for v in os.listdir(base) if v.isdigit()), reverse=True)
    for v in versions:
        d = os.path.join(base, str(v), "bin")
        if os.path.exists(os.path.join(d, "initdb")):
            return d
    raise RuntimeError("no PostgreSQL server under /usr/lib/postgresql")


def wait_for(pred, timeout=60, what="condition"):
    """pred()'s first true value, polled every 0.1 s; AssertionError naming what after timeout s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached after {timeout}s")


_free_ports = []


def free_port():
    """A port for a test's own listener (a server's HTTP or websocket port): the next one of a
    port_range() slot this process holds. A port the kernel picked (bind to port 0, then close)
    could be picked again, or taken by an outgoing connection, before the server bound it: the
    server then failed to start, a test of nothing but GET /version among them."""
    if not _free_ports:
        lo, hi = (int(x) for x in port_range().split("-"))
        _free_ports.extend(range(lo, hi + 1))
    return _free_ports.pop(0)


SLOT_DIR = "/tmp/ty-slots"


def claim_slot(kind, first, count):
    """One of `count` slots of `kind` (a port range, a subnet) that no other live process of this
    machine holds, trying from `first` on: an flock on SLOT_DIR/<kind>-<slot>. Returns (slot, fd);
    the slot is held until fd is closed or the process exits (the kernel then drops the lock, a
    crash included). Tests run side by side (CTest -j); a slot picked from the process id alone
    (pid modulo the number of slots) was sometimes the same for two of them."""
    os.makedirs(SLOT_DIR, exist_ok=True)
    with contextlib.suppress(OSError):
        os.chmod(SLOT_DIR, 0o1777)
    for k in range(count):
        slot = (first + k) % count
        fd = os.open(os.path.join(SLOT_DIR, f"{kind}-{slot}"),
                     os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return slot, fd
    raise RuntimeError(f"every one of the {count} {kind} slots is held by another process")


_port_ranges_given = 0
_port_slots_held = []


def port_range():
    """A MASTER_PORT range for one test agent. Test clusters run side by side on this machine
    (CTest runs test files in parallel), so each agent gets ports no other test process uses:
    20 ports of a slot this process holds (claim_slot) until it exits, instead of the default
    29500-29999, below the kernel's ephemeral range (where outgoing connections take theirs).
    free_port() takes its ports from such ranges too."""
    global _port_ranges_given
    eph_lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            eph_lo = int(f.read().split()[0])
    except (OSError, ValueError):
        pass
    slots = max(1, (eph_lo - 10000) // 20)
    slot, fd = claim_slot("ports", os.getpid() * 7 + _port_ranges_given, slots)
    _port_slots_held.append(fd)
    _port_ranges_given += 1
    lo = 10000 + slot * 20
    return f"{lo}-{lo + 19}"


_uid_ranges = {}


def worker_uids(data_dir):
    """A --worker-uids range of 64 uids for the test agent on `data_dir` (the same one again for a
    restart on it), clear of the agent's default range (2000000000-2000009999). That default would
    be every test agent's: two tests running side by side would give their jobs the same uid, and
    the end of one job kills every process left under its uid, the other test's workers included
    (docs/decisions.md). Each live pytest process has a pid of its own, so ranges picked by pid
    and a counter (which repeats after 8 agents of one process) never meet another test's."""
    if data_dir not in _uid_ranges:
        slot = os.getpid() * 8 + len(_uid_ranges) % 8  # below 2**32 - 1 for any pid_max
        lo = 2000010000 + slot * 64
        _uid_ranges[data_dir] = f"{lo}-{lo + 63}"
    return _uid_ranges[data_dir]


def make_tmpdir(prefix):
    """A temp dir that the postgres user can traverse (pytest's tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    os.chmod(d, 0o755)
    return d


class PostgresCluster:
    """A throw-away PostgreSQL cluster listening only on a unix socket.

    root: the directory of a cluster already started (shared()); stop() leaves such a cluster
    alone unless owned is true."""

    def __init__(self, root=None, owned=True):
        self.root = root or make_tmpdir("ty-pg-")
        self.pgdata = os.path.join(self.root, "data")
        self.sockdir = os.path.join(self.root, "run")
        self.log = os.path.join(self.root, "postgres.log")
        self.bindir = pg_bin_dir()
        self.as_postgres = os.geteuid() == 0
        self.owned = owned
        self.sessions = {}  # (thread, database) -> pgwire.Session

    @classmethod
    def shared(cls):
        """The cluster CTest's fixture `postgres` started for this CTest run, or None when there
        is none or it is not running. $TY_PG_SHARED is a directory with a file per CTest run,
        named by the ctest's pid (the parent of each test process), that holds the cluster's
        directory: two CTest runs in one build dir each have their own."""
        try:
            with open(os.path.join(os.environ["TY_PG_SHARED"], str(os.getppid()))) as f:
                root = f.read().strip()
        except (KeyError, OSError):
            return None
        cluster = cls(root, owned=False)
        if not os.path.exists(os.path.join(cluster.sockdir, ".s.PGSQL.5432")):
            return None
        return cluster

    def _run(self, args, check=True):
        kw = {}
        if self.as_postgres:
            pw = pwd.getpwnam("postgres")

            def demote():
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
            kw["preexec_fn"] = demote
        return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, **kw)

    def start(self):
        os.makedirs(self.sockdir)
        if self.as_postgres:
            pw = pwd.getpwnam("postgres")
            for p in (self.root, self.sockdir):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        self._run([os.path.join(self.bindir, "initdb"), "-D", self.pgdata, "-U", "trainyard",
                   "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"])
        # fsync off: this cluster holds only test data; durability is the embedded mode's job.
        self._run([os.path.join(self.bindir, "pg_ctl"), "start", "-D", self.pgdata, "-l",
                   self.log, "-w", "-o",
                   f"-k {self.sockdir} -c listen_addresses='' -c fsync=off "
                   "-c max_connections=500 -c synchronous_commit=off"])
        return self

    def psql(self, sql, db="postgres"):
        """What `psql -XAtq -v ON_ERROR_STOP=1 -d db -c sql` prints, over a connection this
        thread keeps to db (pgwire.py)."""
        key = (threading.get_ident(), db)
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = pgwire.Session(self.sockdir, db)
        return session.query(sql)

    def close_sessions(self, db=None):
        """Closes the kept connections (to db only, when given)."""
        for key in [k for k in self.sessions if db is None or k[1] == db]:
            self.sessions.pop(key).close()

    def create_database(self):
        # Unique across the processes that share a cluster, pids reused included. Copied file
        # by file: with fsync off, twice as fast as PostgreSQL 15's default strategy (writing
        # the copy to the WAL), and each of several hundred tests makes one.
        name = f"t{os.getpid()}_{uuid.uuid4().hex[:12]}"
        self.psql(f"CREATE DATABASE {name} STRATEGY FILE_COPY")
        return name

    def drop_database(self, name):
        self.close_sessions(name)
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def url(self, db):
        return f"host={self.sockdir} dbname={db} user=trainyard"

    def stop(self):
        """Stops the cluster and removes its directory (nothing for a shared one)."""
        self.close_sessions()
        if not self.owned:
            return
        self._run([os.path.join(self.bindir, "pg_ctl"), "stop", "-D", self.pgdata, "-m", "fast",
                   "-w"], check=False)
        shutil.rmtree(self.root, ignore_errors=True)


def postgres():
    """The shared cluster under CTest (PostgresCluster.shared()), else one started now; stop()
    it when done either way."""
    return PostgresCluster.shared() or PostgresCluster().start()


def postgres_fixture(action, state_dir):
    """CTest's fixture `postgres` (tests/integration/CMakeLists.txt), run by ctest itself:
    "start" starts a cluster for this CTest run and writes its directory to state_dir/<ctest's
    pid> (PostgresCluster.shared()); "stop" stops it. Either first stops the clusters of CTest
    runs that are gone (interrupted before their stop)."""
    os.makedirs(state_dir, exist_ok=True)
    mine = str(os.getppid())
    for name in os.listdir(state_dir):
        if not name.isdigit():
            continue
        if name != mine:
            try:
                os.kill(int(name), 0)
                continue  # another CTest run, still going
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        path = os.path.join(state_dir, name)
        with open(path) as f:
            PostgresCluster(f.read().strip()).stop()
        os.unlink(path)
    if action == "start":
        cluster = PostgresCluster().start()
        path = os.path.join(state_dir, mine)
        with open(path + ".tmp", "w") as f:
            f.write(cluster.root + "\n")
        os.replace(path + ".tmp", path)
        print(f"PostgreSQL for this CTest run (ctest pid {mine}): {cluster.sockdir}")


def log_tail(path, limit=8000):
    """The last `limit` characters of a process's log file ("" when there is none yet)."""
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-limit:]
    except OSError:
        return ""


def stop_process(p, sig, timeout, what):
    """Signals p.proc (a server or an agent), waits for it and returns its exit code; kills it
    and raises, with its log, when it does not stop within `timeout` seconds."""
    if p.proc is None or p.proc.poll() is not None:
        return p.proc.returncode if p.proc else 0
    p.proc.send_signal(sig)
    try:
        return p.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.proc.kill()
        p.proc.wait()
        raise RuntimeError(f"{what} did not stop within {timeout}s:\n{p.log_text()}")
    finally:
        p.log.close()


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.text = body.decode("utf-8", "replace")
        try:
            self.json = json.loads(self.text) if self.text else None
        except ValueError:
            self.json = None

    def __repr__(self):
        return f"<Response {self.status} {self.text[:300]}>"


def http(method, url, body=None, token=None, headers=None, timeout=30, cafile=None):
    """cafile: for https:// URLs, the PEM CA file the server's certificate must chain to."""
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        if isinstance(body, (bytes, str)):
            data = body.encode() if isinstance(body, str) else body
        else:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
    if token:
        hdrs["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    context = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
            return Response(r.status, dict(r.headers), r.read())
    except urllib.error.HTTPError as e:
        return Response(e.code, dict(e.headers), e.read())


class Server:
    """A trainyard-server process."""

    def __init__(self, database_url=None, data_dir=None, auth="token", extra_args=(), env=None,
                 host="127.0.0.1", cwd=None, tls=None, url_host="127.0.0.1"):
        """host None: no --http-host (the server's default). tls: (cert, key, ca) PEM files:
        serve https/wss with cert and key, and trust ca in request(). url_host: the name clients
        use (a certificate's name)."""
        self.data_dir = data_dir or os.path.join(make_tmpdir("ty-srv-"), "data")
        self.port = free_port()
        self.ws_port = free_port()
        self.cafile = tls[2] if tls else None
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://{url_host}:{self.port}"
        self.ws_url = f"{'wss' if tls else 'ws'}://{url_host}:{self.ws_port}"
        host_args = ["--http-host", host] if host else []
        tls_args = ["--tls-cert", tls[0], "--tls-key", tls[1]] if tls else []
        self.args = [SERVER_BIN, *host_args, *tls_args, "--http-port", str(self.port),
                     "--ws-port", str(self.ws_port), "--data-dir", self.data_dir, "--auth", auth,
                     "--http-threads", "4", *extra_args]
        if database_url:
            self.args += ["--database-url", database_url]
        self.env = dict(os.environ, **(env or {}))
        self.cwd = cwd
        self.log_path = os.path.join(os.path.dirname(self.data_dir), "server.log")
        self.proc = None
        self.admin_token = None

    def start(self, wait=True):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=self.env, cwd=self.cwd)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                if http("GET", self.url + "/api/v1/health", timeout=2,
                        cafile=self.cafile).status == 200:
                    token_file = os.path.join(self.data_dir, "admin.token")
                    if os.path.exists(token_file):
                        with open(token_file) as f:
                            self.admin_token = f.read().strip()
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server not ready after {timeout}s:\n{self.log_text()}")

    def log_text(self):
        return log_tail(self.log_path)

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops the server and returns its exit code (0 after a clean shutdown)."""
        return stop_process(self, sig, timeout, "server")

    def request(self, method, path, body=None, token="admin", headers=None, timeout=30):
        if token == "admin":
            token = self.admin_token
        return http(method, self.url + path, body=body, token=token, headers=headers,
                    timeout=timeout, cafile=self.cafile)

    def create_token(self, name, role):
        r = self.request("POST", "/api/v1/tokens", {"name": name, "role": role})
        assert r.status == 201, r
        return r.json["token"]

    def submit(self, spec, token="admin"):
        r = self.request("POST", "/api/v1/jobs", spec, token=token)
        assert r.status == 201, r
        return r.json

    def wait_job(self, job_id, statuses, timeout=120):
        """Polls until the job's status is one of `statuses`; returns the job."""
        deadline = time.time() + timeout
        job = None
        while time.time() < deadline:
            job = self.request("GET", f"/api/v1/jobs/{job_id}").json
            if job and job["status"] in statuses:
                return job
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} not in {statuses} after {timeout}s: {job}\n"
                             f"{self.log_text()}")

    def stop_unfinished_jobs(self, timeout=60):
        """Stops every job not yet ended and waits until each has: what a test that shares
        this server with the tests after it leaves behind (conftest.py, module_server_factory)."""
        live = ",".join(s for s in VOCAB.JOB_STATUSES if s not in VOCAB.TERMINAL_JOB_STATUSES)
        jobs, cursor = [], ""
        while cursor is not None:
            page = self.request("GET", f"/api/v1/jobs?status={live}&limit=100{cursor}").json
            jobs += page["jobs"]
            cursor = f"&cursor={page['next_cursor']}" if page["next_cursor"] else None
        for j in jobs:
            self.request("POST", f"/api/v1/jobs/{j['id']}/stop")
        for j in jobs:
            self.wait_job(j["id"], set(VOCAB.TERMINAL_JOB_STATUSES), timeout=timeout)


class HttpProxy:
    """An HTTP proxy on a free loopback port (self.url) that forwards each request to `target` (a
    base URL) and its reply back, counting requests per method (self.counts). A subclass
    changes what passes: before(method, number, body) returns the body to forward, or DROP to
    close the connection unsent; after(method, number) returns False to lose the server's reply
    (closing the connection). number: 1 for the first request of that method."""

    DROP = object()

    def __init__(self, target):
        self.target = target
        self.counts = {}
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def relay(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                with proxy.lock:
                    number = proxy.counts[self.command] = proxy.counts.get(self.command, 0) + 1
                body = proxy.before(self.command, number, body)
                if body is HttpProxy.DROP:
                    self.close_connection = True
                    return
                hdrs = {k: v for k, v in self.headers.items()
                        if k.lower() not in ("host", "content-length", "connection")}
                r = http(self.command, proxy.target + self.path, body=body, headers=hdrs)
                if not proxy.after(self.command, number):
                    self.close_connection = True
                    return
                data = r.text.encode()
                self.send_response(r.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = relay

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def puts(self):
        return self.counts.get("PUT", 0)

    def before(self, method, number, body):
        return body

    def after(self, method, number):
        return True

    def close(self):
        self.httpd.shutdown()
        self.thread.join()


class TcpProxy:
    """A TCP proxy on a free loopback port (self.port, self.url) to `target` (host, port): each
    connection it accepts (counted in self.connections) is handed to relay(number, client,
    upstream), which by default pipes both ways; a subclass changes it."""

    def __init__(self, target):
        self.target = target
        self.connections = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            upstream = socket.create_connection(self.target)
            self.relay(self.connections, client, upstream)

    def relay(self, number, client, upstream):
        self.spawn(self.pipe, client, upstream)
        self.spawn(self.pipe, upstream, client)

    def close(self):
        """Stops accepting connections (those relayed go on until they end)."""
        self.sock.close()

    @staticmethod
    def spawn(fn, *args):
        threading.Thread(target=fn, args=args, daemon=True).start()

    @staticmethod
    def pipe(src, dst, limit=None, delay=0):
        """Copies src to dst until src ends or `limit` bytes have passed, holding the first bytes
        back `delay` seconds; then shuts both down."""
        sent = 0
        try:
            while True:
                data = src.recv(65536 if limit is None else min(65536, limit - sent))
                if not data:
                    break
                if delay and sent == 0:
                    time.sleep(delay)
                dst.sendall(data)
                sent += len(data)
                if limit is not None and sent >= limit:
                    break
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def run_cli(server, *args, token="admin", env=None, input=None, timeout=60):
    e = dict(os.environ)
    e.pop("TRAINYARD_TOKEN", None)
    e["TRAINYARD_SERVER"] = server.url
    if token == "admin":
        token = server.admin_token
    if token:
        e["TRAINYARD_TOKEN"] = token
    e.update(env or {})
    return subprocess.run([CLI_BIN, *args], env=e, input=input, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


class Agent:
    """A trainyard-agent process joined to `server`, optionally inside a network namespace;
    restartable on the same data dir (start() again after stop() or kill()).

    args: the agent's own flags. None (the default) builds them from cpus, memory_mb, gpus
    ("none" when not given), gpu_type and a 3 s stop grace; a list (even an empty one) passes
    exactly those flags and leaves the rest to the agent's defaults. extra_args come after either.
    A --port-range from port_range() is added unless the flags give one."""

    def __init__(self, server, data_dir=None, cpus=2, memory_mb=4096, gpus=None, gpu_type=None,
                 extra_args=(), netns=None, server_addr=None, args=None, env=None, also=(),
                 hide=(), api_url="server"):
        """also: more servers of the same cluster, listed after `server` in --server. hide:
        directories this agent (and its workers) must not see: each is covered by an empty tmpfs
        in a mount namespace of its own, as on a node where that filesystem is not mounted.
        api_url: "server": TRAINYARD_API_URL is the server's REST URL (outside a netns); None:
        none, the agent uses the URLs the server names at registration; a URL: that one."""
        root = make_tmpdir("ty-agent-")
        self.server = server
        self.also = list(also)
        self.data_dir = data_dir or os.path.join(root, "data")
        self.log_path = os.path.join(root, "agent.log")
        if args is None:
            args = ["--cpus", str(cpus), "--memory-mb", str(memory_mb), "--stop-grace-s", "3",
                    "--gpus", gpus or "none", *(["--gpu-type", gpu_type] if gpu_type else [])]
        self.args = [*args, *extra_args]
        if "--port-range" not in self.args:
            self.args += ["--port-range", port_range()]
        self.port_range = self.args[self.args.index("--port-range") + 1]
        self.netns = netns
        self.hide = list(hide)
        self.api_url = api_url
        self.server_addr = server_addr
        # Workers run as the agent (root here) unless a test asks for isolation: most tests hand
        # jobs directories under their own temporary paths. TY_TEST_RUN_AS=auto runs the whole
        # suite with workers under uids of their own.
        run_as = os.environ.get("TY_TEST_RUN_AS", "none")
        self.env = dict(os.environ, **{"TRAINYARD_AGENT_RUN_AS": run_as, **(env or {})})
        if "--worker-uids" not in self.args:
            self.env.setdefault("TRAINYARD_AGENT_WORKER_UIDS", worker_uids(self.data_dir))
        self.proc = None
        self.log = None
        self.log_start = 0
        self.stopped_by_test = False

    def start(self, server=None, token="cluster", wait=True):
        """Starts the agent (against `server` when given); token "cluster" joins with the server's
        cluster token, None passes none. wait: until the node is ALIVE (see wait_node)."""
        self.server = server or self.server
        if token == "cluster":
            token = cluster_token(self.server)
        ws = f"ws://{self.server_addr}" if self.server_addr else self.server.ws_url
        ws = ",".join([ws, *(s.ws_url for s in self.also)])
        hiding = []
        if self.hide:
            mounts = " && ".join(f"mount -t tmpfs tmpfs {shlex.quote(d)}" for d in self.hide)
            hiding = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                      f'{mounts} && exec "$@"', "sh"]
        cmd = [*(["ip", "netns", "exec", self.netns] if self.netns else []), *hiding,
               *AGENT_WRAPPER, AGENT_BIN, "--server", ws, "--data-dir", self.data_dir,
               *self.args]
        if token:
            # A token file, never argv: every local user can read a command line (ps).
            token_file = os.path.join(make_tmpdir("ty-token-"), "cluster.token")
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
            cmd += ["--token-file", token_file]
        self.log = open(self.log_path, "ab")
        self.log_start = self.log.tell()
        env = dict(self.env)
        if self.api_url is None:
            env.pop("TRAINYARD_API_URL", None)
        elif self.api_url != "server":
            env["TRAINYARD_API_URL"] = self.api_url
        elif not self.netns:  # checkpoint uploads go to the server's REST port (docs/artifacts.md)
            env.setdefault("TRAINYARD_API_URL", self.server.url)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.stopped_by_test = False
        if wait:
            try:
                self.wait_node()
            except BaseException:
                # The caller never gets this agent back to stop: it would outlive the test.
                self.proc.kill()
                self.proc.wait()
                raise
        return self

    def _node_id_now(self):
        """The declared --node-id, else the one the agent wrote to its data dir, else None."""
        if "--node-id" in self.args:
            return self.args[self.args.index("--node-id") + 1]
        try:
            with open(os.path.join(self.data_dir, "node-id")) as f:
                return f.read().strip() or None
        except OSError:
            return None

    @property
    def node_id(self):
        """This agent's node id (waits up to 10 s for the agent to write it)."""
        deadline = time.time() + 10
        while (node_id := self._node_id_now()) is None:
            if time.time() > deadline:
                raise AssertionError(f"agent wrote no node-id:\n{self.log_text()}")
            time.sleep(0.05)
        return node_id

    def registered(self):
        """Whether the running process has been accepted by the server."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                return b"registered with" in f.read()
        except OSError:
            return False

    def wait_node(self, statuses=("ALIVE",), timeout=30):
        """Polls the server until this agent's node has one of `statuses` and returns the node.
        For ALIVE the running process must also have registered (a node left ALIVE by an earlier
        process on this data dir does not count), and it must not exit meanwhile."""
        alive = "ALIVE" in statuses
        deadline = time.time() + timeout
        node = None
        while time.time() < deadline:
            if alive and self.proc.poll() is not None:
                raise RuntimeError(f"agent exited with {self.proc.returncode}:\n{self.log_text()}")
            node_id = self._node_id_now()
            if node_id and (not alive or self.registered()):
                r = self.server.request("GET", f"/api/v1/nodes/{node_id}")
                node = r.json if r.status == 200 else None
                if node and node["status"] in statuses:
                    return node
            time.sleep(0.05)
        raise AssertionError(f"node {self._node_id_now()} not in {statuses} after {timeout}s: "
                             f"{node}\nagent log:\n{self.log_text()}\nserver log:\n"
                             f"{self.server.log_text()}")

    def log_text(self):
        return log_tail(self.log_path)

    def worker_log(self, job_id, rank, attempt=1, stream=None):
        """The rank's output as its agent keeps it: stdout's file (rank-R.log) then stderr's
        (rank-R.err.log, when there is one), or only the one `stream` names."""
        d = os.path.join(self.data_dir, "logs", str(job_id), str(attempt))
        text = ""
        for s, name in (("stdout", f"rank-{rank}.log"), ("stderr", f"rank-{rank}.err.log")):
            if stream in (None, s) and (s == "stdout" or os.path.exists(os.path.join(d, name))):
                with open(os.path.join(d, name)) as f:
                    text += f.read()
        return text

    def kill(self):
        """Kills the agent as a crash would (its workers are left behind)."""
        self.stopped_by_test = True
        return stop_process(self, signal.SIGKILL, 60, "agent")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Stops the agent and returns its exit code (0 after a clean shutdown)."""
        return stop_process(self, sig, timeout, "agent")

    def kill_node(self, worker_pids):
        """A node gone: SIGKILL to the agent, then to each of worker_pids' process groups and
        to every worker supervisor the agent recorded."""
        self.kill()
        d = os.path.join(self.data_dir, "workers")
        sups = []
        for name in os.listdir(d) if os.path.isdir(d) else []:
            if name.endswith(".json"):
                with open(os.path.join(d, name)) as f:
                    sups.append(json.load(f)["supervisor_pid"])
        for pid in worker_pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in sups:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], check=check, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def netns_hosts(net=231):
    """Two namespaces tyA/tyB (10.<net>.N.2, .3) bridged to the host (10.<net>.N.1), their names
    made from this process's pid and N a subnet slot it holds (claim_slot) while they exist, so
    parallel runs never collide; a test file of its own
    passes its own `net` so its subnet differs from another file's run at the same time. Skips
    the test where namespaces cannot be made (a failure on CI). Yields bridge_addr, namespaces
    and addrs; netns_agent() starts agents in them."""
    import pytest  # here: the benchmarks (bench/) use this file without pytest
    n, subnet_fd = claim_slot(f"subnet-{net}", os.getpid() % 200, 200)
    # A subnet already on one of the host's interfaces (a bridge left by a run that was killed,
    # or by a run whose slot locks live in another /tmp, as in a chroot) would take the replies:
    # the next slot instead.
    try:
        used = subprocess.run(["ip", "-4", "-o", "addr"], stdout=subprocess.PIPE, text=True,
                              check=False).stdout
    except FileNotFoundError:
        used = ""  # no iproute2: the bridge below fails and says so
    for _ in range(200):
        if f" 10.{net}.{n + 20}." not in used:
            break
        held = subnet_fd
        n, subnet_fd = claim_slot(f"subnet-{net}", n + 1, 200)
        os.close(held)
    n += 20
    tag = f"{os.getpid() % 100000}"
    bridge, names = f"tybr{tag}", [f"tyA{tag}", f"tyB{tag}"]
    try:
        _ip("link", "add", bridge, "type", "bridge")
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        os.close(subnet_fd)
        # CI's machine (root, iproute2 installed by scripts/install-deps.sh) has them: there a
        # missing namespace is a broken test set-up, not a reason to pass.
        if os.environ.get("CI"):
            pytest.fail(f"network namespaces unavailable on CI: {e}")
        print(f"SKIP REASON: cannot create network namespaces here: {e}")
        pytest.skip(f"network namespaces unavailable: {e}")
    made, veths = [], []
    try:
        _ip("addr", "add", f"10.{net}.{n}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        addrs = []
        for i, ns in enumerate(names):
            _ip("netns", "add", ns)
            made.append(ns)
            host_end, ns_end = f"tyh{tag}{i}", f"tyn{tag}{i}"
            _ip("link", "add", host_end, "type", "veth", "peer", "name", ns_end)
            veths.append(host_end)
            _ip("link", "set", ns_end, "netns", ns)
            _ip("link", "set", host_end, "master", bridge)
            _ip("link", "set", host_end, "up")
            addr = f"10.{net}.{n}.{i + 2}"
            _ip("netns", "exec", ns, "ip", "addr", "add", f"{addr}/24", "dev", ns_end)
            _ip("netns", "exec", ns, "ip", "link", "set", ns_end, "up")
            _ip("netns", "exec", ns, "ip", "link", "set", "lo", "up")
            addrs.append(addr)
        yield {"bridge_addr": f"10.{net}.{n}.1", "namespaces": names, "addrs": addrs}
    finally:
        # The veths first: deleting a namespace frees its end asynchronously, and the next test
        # of this process makes the same names again at once.
        for v in veths:
            _ip("link", "del", v, check=False)
        for ns in made:
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", bridge, check=False)
        os.close(subnet_fd)


def netns_agent(server, hosts, i, **kw):
    """An Agent (not started) in namespace i of netns_hosts() `hosts`, joined to `server` (which
    listens on 0.0.0.0) over the bridge; kw as for Agent."""
    return Agent(server, netns=hosts["namespaces"][i],
                 server_addr=f"{hosts['bridge_addr']}:{server.ws_port}", **kw)


def cluster_token(server):
    """The server's cluster token (None when it wrote none)."""
    path = os.path.join(server.data_dir, "cluster.token")
    if os.path.exists(path):
        with open(path) as f:
            return f.read().strip()
    return None


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
    """KEY=VALUE lines of a file a worker writes (`env > path`), once it is complete."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        time.sleep(0.05)
    raise AssertionError(f"{path} was not written")


if __name__ == "__main__":
    import sys
    if len(sys.argv) != 3 or sys.argv[1] not in ("postgres-start", "postgres-stop"):
        sys.exit("usage: harness.py postgres-start|postgres-stop STATE_DIR")
    postgres_fixture(sys.argv[1].split("-")[1], sys.argv[2])
