"""What every worker of a fit() job runs: `python3 -m trainyard.train._runner`. It loads the
training function that fit() named in its one argument (JSON: from the user's script, imported under
another name than __main__ so that its `if __name__ == "__main__":` block does not run again,
as multiprocessing's spawn does, or from an importable module), sets up the framework's
distributed environment, and calls it with the train_loop_config."""

import base64
import importlib
import importlib.util
import inspect
import json
import os
import pickle
import sys
import traceback

from ._trainer import MAIN_ALIAS, RETURN_MARK
from ._vocab import BACKEND_NONE, BACKEND_TORCH

RETURN_CHUNK = 8000  # characters per line, under the agent's log line cut (16 KiB)


def print_return_value(value):
    """Prints the function's return value (pickled, base64) on stdout as lines
    `RETURN_MARK i n chunk`, for Trainer.run() to collect from the job's log."""
    text = base64.b64encode(pickle.dumps(value, protocol=4)).decode("ascii")
    chunks = [text[i:i + RETURN_CHUNK] for i in range(0, len(text), RETURN_CHUNK)] or [""]
    for i, c in enumerate(chunks):
        print(f"{RETURN_MARK} {i} {len(chunks)} {c}", flush=True)


def load_function(spec):
    """The function `spec` names: {"file": path, "qualname"}, {"module", "qualname"}, or
    {"pickled": file}: a function that travelled by value (cloudpickle) in the code package."""
    sys.path.insert(0, os.getcwd())
    if "pickled" in spec:
        try:
            with open(spec["pickled"], "rb") as f:
                return pickle.load(f)
        except ModuleNotFoundError as e:
            if e.name == "cloudpickle":
                raise RuntimeError("the training function travelled by value (cloudpickle): "
                                   "this node's Python needs python3-cloudpickle") from None
            raise
    if "file" in spec:
        path = os.path.abspath(spec["file"])
        sys.path.insert(0, os.path.dirname(path))
        mspec = importlib.util.spec_from_file_location(MAIN_ALIAS, path)
        module = importlib.util.module_from_spec(mspec)
        sys.modules[MAIN_ALIAS] = module
        from . import _trainer
        _trainer.in_worker_import = True
        try:
            mspec.loader.exec_module(module)
        except _trainer.WorkerImportStop:
            pass  # the script's own fit() call: everything above it is defined
        finally:
            _trainer.in_worker_import = False
    else:
        module = importlib.import_module(spec["module"])
    obj = module
    for part in spec["qualname"].split("."):
        obj = getattr(obj, part)
    return obj


class _MainUnpickler(pickle.Unpickler):
    """Finds what the user's script defined (pickled as __main__) in its import under
    MAIN_ALIAS."""

    def find_class(self, module, name):
        if module == "__main__" and MAIN_ALIAS in sys.modules:
            module = MAIN_ALIAS
        return super().find_class(module, name)


def load_datasets():
    """The datasets= that fit() packed into the code package, or None."""
    from ._trainer import DATASETS_FILE
    try:
        f = open(DATASETS_FILE, "rb")
    except FileNotFoundError:
        return None
    with f:
        return _MainUnpickler(f).load()


def setup_backend(backend):
    """torch: the default process group over MASTER_ADDR/MASTER_PORT (NCCL with GPUs, else
    Gloo), each worker on its local GPU. Returns a teardown function."""
    if backend != BACKEND_TORCH or int(os.environ.get("WORLD_SIZE", "1")) < 1:
        return lambda: None
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        return lambda: None
    use_cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    if use_cuda:
        torch.cuda.set_device(0 if torch.cuda.device_count() == 1
                              else int(os.environ.get("LOCAL_RANK", "0")))
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", init_method="env://")
        return dist.destroy_process_group
    return lambda: None


def main():
    spec = json.loads(sys.argv[1])
    os.environ["TRAINYARD_EXPERIMENT_NAME"] = spec.get("name", "")
    del sys.argv[1]
    fn = load_function(spec)
    from . import _session
    _session.set_datasets(load_datasets())
    teardown = setup_backend(spec.get("backend", BACKEND_NONE))
    import trainyard
    config = trainyard.get_context().config
    try:
        takes_config = len(inspect.signature(fn).parameters) >= 1
    except (TypeError, ValueError):
        takes_config = True
    try:
        value = fn(config if config is not None else {}) if takes_config else fn()
        if spec.get("returns"):
            print_return_value(value)
    finally:
        teardown()


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        sys.exit(1)
