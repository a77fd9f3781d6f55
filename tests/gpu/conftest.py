"""The integration tests' fixtures (tests/integration/conftest.py: PostgreSQL, server, CLI) for
the `gpu`-labelled tests, which live apart so the normal suite does not collect them."""
import importlib.util
import os
import sys

_INTEGRATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration")
sys.path.insert(0, _INTEGRATION)
_spec = importlib.util.spec_from_file_location("ty_integration_conftest",
                                               os.path.join(_INTEGRATION, "conftest.py"))
_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fixtures)
session_pg, pg, database, server_factory, server, cli = (
    _fixtures.session_pg, _fixtures.pg, _fixtures.database, _fixtures.server_factory,
    _fixtures.server, _fixtures.cli)
pytest_configure = _fixtures.pytest_configure
agent_factory = _fixtures.agent_factory
