"""The OpenAPI document and the routing table describe the same API, and its enums are the C
vocabulary (common/vocab.h)."""
import json
import os
import subprocess

import harness


def test_openapi_document_matches_routing_table(server):
    doc = server.request("GET", "/api/v1/openapi.json").json
    assert doc["openapi"].startswith("3.1")
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops
                  if m in ("get", "post", "put", "delete", "patch")}
    routes = json.loads(subprocess.run([harness.SERVER_BIN, "--print-routes"], check=True,
                                       stdout=subprocess.PIPE, text=True).stdout)
    served = {(r["method"], r["path"]) for r in routes}
    assert documented == served


def test_openapi_refs_resolve(server):
    doc = server.request("GET", "/api/v1/openapi.json").json
    schemas = doc["components"]["schemas"]

    def walk(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref:
                assert ref.startswith("#/components/schemas/")
                assert ref.split("/")[-1] in schemas, ref
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)


# Where the document enumerates the vocabulary of common/vocab.h: schema path -> vocab.json key.
VOCAB_ENUMS = {
    ("Job", "status"): "job_statuses",
    ("Worker", "status"): "worker_statuses",
    ("Node", "status"): "node_statuses",
    ("JobSpec", "backend"): "backends",
    ("JobSpec", "scaling_config", "placement_strategy"): "placement_strategies",
    ("JobSpec", "run_config", "checkpoint_config", "checkpoint_score_order"):
        "checkpoint_score_orders",
    ("LogLine", "stream"): "log_streams",
}


def _c_vocab():
    """The C vocabulary as vocab-dump wrote it at build time (common/vocab.h)."""
    with open(os.path.join(harness.BUILD_DIR, "vocab", "vocab.json")) as f:
        return json.load(f)


def test_openapi_enums_are_the_c_vocabulary(server):
    doc = server.request("GET", "/api/v1/openapi.json").json
    schemas = doc["components"]["schemas"]
    vocab = _c_vocab()
    for path, key in VOCAB_ENUMS.items():
        node = schemas[path[0]]
        for prop in path[1:]:
            node = node["properties"][prop]
        assert node["enum"] == vocab[key], f"{'.'.join(path)}: {node['enum']} != C {vocab[key]}"

    # Any other enum that uses a name of the vocabulary must be a whole list of it too.
    def walk(node, where):
        if isinstance(node, dict):
            values = [v for v in node.get("enum", []) if v is not None]
            lists = [v for v in vocab.values() if set(values) & set(v)]
            assert not lists or any(values == v for v in lists), \
                f"{where}: enum {values} is not one of the C lists {lists}"
            for k, v in node.items():
                walk(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{where}[{i}]")
    walk(doc, "")
