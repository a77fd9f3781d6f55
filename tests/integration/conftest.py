"""pytest fixtures over harness.py: a PostgreSQL cluster (CTest's one for the whole run, else
one per test session), a fresh database and a real server per test, the CLI bound to that
server. A test marked own_postgres (one that stops or restarts PostgreSQL) gets a cluster of its
own."""
import functools

import pytest

import harness


def pytest_configure(config):
    config.addinivalue_line("markers", "own_postgres: the test gets a PostgreSQL cluster of its "
                            "own (it stops or restarts it)")


@pytest.fixture(scope="session")
def session_pg():
    cluster = harness.postgres()
    yield cluster
    cluster.stop()


@pytest.fixture
def pg(request):
    if request.node.get_closest_marker("own_postgres"):
        cluster = harness.PostgresCluster().start()
        yield cluster
        cluster.stop()
    else:
        yield request.getfixturevalue("session_pg")


@pytest.fixture
def database(pg):
    name = pg.create_database()
    yield pg.url(name)
    pg.drop_database(name)


def _servers(database_url):
    """A factory of servers on database_url (its `started` lists them), and their stop: each
    must exit 0."""
    started = []

    def make(**kw):
        kw.setdefault("database_url", database_url)
        s = harness.Server(**kw)
        started.append(s)
        return s.start()

    def stop_all():
        for s in started:
            code = s.stop()
            assert code == 0, f"server exited with {code}:\n{s.log_text()}"

    make.started = started
    return make, stop_all


@pytest.fixture
def server_factory(database):
    """Starts servers on the test's database; each is stopped (and must exit 0) at teardown."""
    make, stop_all = _servers(database)
    yield make
    stop_all()


@pytest.fixture(scope="module")
def module_server_factory(session_pg):
    """server_factory for servers that the tests of a file share, on a database of their own:
    a test file whose tests each make their own jobs uses it to start one server, not one per
    test (about 0.6 CPU-seconds each, docs/decisions.md). Each test's unfinished jobs are
    stopped after it (stop_unfinished_jobs), so that none waits for the next test's nodes."""
    name = session_pg.create_database()
    make, stop_all = _servers(session_pg.url(name))
    yield make
    stop_all()
    session_pg.drop_database(name)


@pytest.fixture(autouse=True)
def _settle_shared_servers(request):
    """After each test of a file that shares its servers (module_server_factory): the test's
    unfinished jobs are stopped, once its agents have gone (this fixture is torn down last)."""
    yield
    if "module_server_factory" in request.fixturenames:
        for s in request.getfixturevalue("module_server_factory").started:
            if s.proc.poll() is None:
                s.stop_unfinished_jobs()


@pytest.fixture
def server(server_factory):
    return server_factory()


@pytest.fixture
def cli(server):
    return functools.partial(harness.run_cli, server)


@pytest.fixture
def agent_factory(request):
    """Starts agents joined to the test's server (or `srv`); each must exit 0 on SIGTERM at
    teardown."""
    # The test's own servers are stopped after its agents: server_factory is set up first, so
    # torn down last. A test on a shared server (module_server_factory) that starts no server
    # of its own needs no database of its own either.
    if "module_server_factory" not in request.fixturenames or \
            "server_factory" in request.fixturenames:
        request.getfixturevalue("server_factory")
    started = []

    def make(srv=None, **kw):
        a = harness.Agent(srv or request.getfixturevalue("server"), **kw)
        started.append(a)
        return a.start()

    yield make
    for a in started:
        if a.stopped_by_test:
            continue
        code = a.stop()
        assert code == 0, f"agent exited with {code}:\n{a.log_text()}"
