"""trainyard.data: a small part of Ray Data, enough for a trainer's datasets= (docs/python-api.md).

    import trainyard.data as data           # ray.data
    ds = data.read_csv("/shared/train/")    # files or directories every node sees
    trainer = TorchTrainer(train_func, datasets={"train": ds.random_shuffle()}, ...)

    def train_func(config):
        shard = train.get_dataset_shard("train")
        for epoch in range(3):
            for batch in shard.iter_batches(batch_size=32):   # {"col": numpy array}
                ...

Datasets: from_items, from_numpy, range, read_csv, read_json (JSON Lines, or a file holding one
array), read_text. Rows are dicts ({"item": x} for from_items of non-dicts, {"data": row} for
from_numpy, {"id": i} for range, {"text": line} for read_text).

How a dataset is split and shipped (each worker reads only its part; the dataset never travels
whole to every worker):
  - range(n): nothing travels but n; rank r of W makes rows [r*n/W, (r+1)*n/W) itself.
  - from_items / from_numpy: the rows are cut, on the submitting side, into one block per worker
    (num_workers of the scaling config), each block a file of the job's code package; a worker
    loads only its blocks (rank r of W: blocks r, r+W, ...).
  - read_*: only the file list (paths and sizes) travels; the files must be where every node sees
    them (shared storage), as a Ray cluster's files are. With at least as many files as workers,
    rank r reads files r, r+W, ...; with fewer, every file is cut into W byte ranges at line
    boundaries and rank r reads only range r of each (its header aside, for CSV), so no byte is
    read by two workers. A JSON file holding one array cannot be cut: rank (its index mod W)
    reads it whole.
Shuffling is per worker and per epoch: random_shuffle() (or iter_batches'
local_shuffle_buffer_size) reorders a worker's rows differently on every pass over its shard; the
rows do not move between workers.
"""

import csv
import json
import os
import pickle
import random

__all__ = ["Dataset", "DataShard", "from_items", "from_numpy", "range", "read_csv", "read_json",
           "read_text"]

_range = range  # the builtin, shadowed by range() below
BLOCK_PREFIX = "__trainyard_data_"  # the code package's block files: <prefix><key>_<i>.pkl


# --- sources: what a dataset reads, and the part of it rank r of W reads ---------------------

class _Rows:
    """Rows in memory (from_items, from_numpy), cut into blocks at fit() time."""

    def __init__(self, rows):
        self.rows = rows

    def count(self):
        return len(self.rows)

    def plan(self, key, blocks):
        n = len(self.rows)
        names = [f"{BLOCK_PREFIX}{key}_{i}.pkl" for i in _range(blocks)]
        files = {name: pickle.dumps(self.rows[i * n // blocks:(i + 1) * n // blocks], protocol=4)
                 for i, name in enumerate(names)}
        return _Blocks(names), files

    def read(self, rank, world):
        n = len(self.rows)
        return iter(self.rows[rank * n // world:(rank + 1) * n // world])


class _Blocks:
    """A worker's side of _Rows: the block files in the code package."""

    def __init__(self, names):
        self.names = names

    def read(self, rank, world):
        for name in self.names[rank::world]:
            with open(name, "rb") as f:
                yield from pickle.load(f)


class _Range:
    def __init__(self, n):
        self.n = n

    def count(self):
        return self.n

    def plan(self, key, blocks):
        return self, {}

    def read(self, rank, world):
        return ({"id": i} for i in _range(rank * self.n // world, (rank + 1) * self.n // world))


def _convert(text):
    """A CSV field as int, float or str (as Ray's CSV reader infers); '' as None."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _lines(path, start, end):
    """The lines of `path` that start at a byte offset in [start, end): a line belongs to the
    range its first byte is in, so ranges that tile a file read each line once."""
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            f.readline()  # the rest of the line that began before `start` (or just its '\n')
        while f.tell() < end:
            line = f.readline()
            if not line:
                return
            yield line.decode("utf-8").rstrip("\r\n")


class _Files:
    """Files of one format: only their paths and sizes travel."""

    def __init__(self, kind, files):
        self.kind = kind
        self.files = files  # [(absolute path, size)]

    def count(self):
        return sum(1 for _ in self.read(0, 1))

    def plan(self, key, blocks):
        return self, {}

    def read(self, rank, world):
        if len(self.files) >= world:
            for path, size in self.files[rank::world]:
                yield from self._rows(path, 0, size, True)
            return
        for i, (path, size) in enumerate(self.files):
            if self.kind == "json" and _json_array(path):
                if i % world == rank:
                    yield from self._rows(path, 0, size, True)
                continue
            yield from self._rows(path, rank * size // world, (rank + 1) * size // world, False)

    def _rows(self, path, start, end, whole):
        if self.kind == "json" and whole and _json_array(path):
            with open(path, encoding="utf-8") as f:
                for row in json.load(f):
                    yield row if isinstance(row, dict) else {"item": row}
            return
        lines = _lines(path, start, end)
        if self.kind == "text":
            for line in lines:
                yield {"text": line}
        elif self.kind == "json":
            for n, line in enumerate(lines):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except ValueError as e:
                        raise ValueError(f"{path}: not JSON Lines near byte {start} (line {n + 1} "
                                         f"of this worker's part): {e}") from None
                    yield row if isinstance(row, dict) else {"item": row}
        else:
            with open(path, encoding="utf-8", newline="") as f:
                header = next(csv.reader([f.readline()]), [])
            if start == 0:
                next(lines, None)  # the header line
            for fields in csv.reader(lines):
                if fields:
                    yield {k: _convert(v) for k, v in zip(header, fields)}


def _json_array(path):
    """Whether the JSON file at `path` holds one array (rather than JSON Lines)."""
    with open(path, "rb") as f:
        head = f.read(4096).lstrip()
    return head[:1] == b"["


def _files(paths, kind):
    """The regular files of `paths` (files, or directories walked in name order; names starting
    with '.' or '_' left out), absolute, with their sizes."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    out = []
    for p in paths:
        p = os.path.abspath(os.fspath(p))
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
                for name in sorted(names):
                    if not name.startswith((".", "_")):
                        full = os.path.join(root, name)
                        out.append((full, os.path.getsize(full)))
        elif os.path.isfile(p):
            out.append((p, os.path.getsize(p)))
        else:
            raise FileNotFoundError(f"read_{kind}: {p} is neither a file nor a directory")
    if not out:
        raise FileNotFoundError(f"read_{kind}: no file in {', '.join(map(str, paths))}")
    return out


# --- batches ----------------------------------------------------------------------------------

def _numpy_batch(rows):
    import numpy as np
    cols = {}
    for row in rows:
        for k in row:
            cols.setdefault(k, None)
    return {k: np.array([r.get(k) for r in rows]) for k in cols}


def _format(rows, batch_format):
    if batch_format in ("default", "numpy"):
        return _numpy_batch(rows)
    if batch_format == "pandas":
        import pandas
        return pandas.DataFrame(rows)
    raise ValueError(f"batch_format {batch_format!r}: use 'numpy' (or 'default') or 'pandas'")


def _batches(rows, batch_size, drop_last):
    batch = []
    for row in rows:
        batch.append(row)
        if batch_size is not None and len(batch) >= batch_size:
            yield batch
            batch = []
    if batch and not (drop_last and batch_size is not None):
        yield batch


# --- the user's objects ----------------------------------------------------------------------

class DataShard:
    """One worker's part of a dataset (train.get_dataset_shard(name)), as Ray's DataIterator:
    iter_rows, iter_batches, iter_torch_batches. Each call is one epoch (a pass over the part);
    a shuffled dataset's rows come in another order each epoch."""

    def __init__(self, source, rank, world, shuffle=False, seed=None):
        self._source, self._rank, self._world = source, rank, world
        self._shuffle, self._seed = shuffle, seed
        self._epoch = 0

    def _rows(self, shuffle_buffer=None, seed=None):
        rows = self._source.read(self._rank, self._world)
        epoch = self._epoch
        self._epoch += 1
        if not (self._shuffle or shuffle_buffer):
            return rows
        rows = list(rows)
        base = seed if seed is not None else self._seed
        rng = random.Random(None if base is None else f"{base}-{self._rank}-{epoch}")
        rng.shuffle(rows)
        return iter(rows)

    def iter_rows(self):
        """This worker's rows (dicts), one epoch."""
        return self._rows()

    def iter_batches(self, *, batch_size=256, batch_format="default", drop_last=False,
                     local_shuffle_buffer_size=None, local_shuffle_seed=None, prefetch_batches=1):
        """This worker's rows in batches of batch_size (None: one batch), one epoch:
        batch_format "numpy" / "default" gives {column: numpy array}, "pandas" a DataFrame."""
        rows = self._rows(local_shuffle_buffer_size, local_shuffle_seed)
        for batch in _batches(rows, batch_size, drop_last):
            yield _format(batch, batch_format)

    def iter_torch_batches(self, *, batch_size=256, dtypes=None, device="auto",
                           drop_last=False, local_shuffle_buffer_size=None,
                           local_shuffle_seed=None, prefetch_batches=1, collate_fn=None):
        """iter_batches with torch tensors ({column: tensor}; columns of strings stay numpy
        arrays), on `device` ("auto": this worker's, train.torch.get_device())."""
        import torch
        if device == "auto":
            from .train.torch import get_device
            device = get_device()
        for batch in self.iter_batches(batch_size=batch_size, drop_last=drop_last,
                                       local_shuffle_buffer_size=local_shuffle_buffer_size,
                                       local_shuffle_seed=local_shuffle_seed):
            if collate_fn is not None:
                yield collate_fn(batch)
                continue
            out = {}
            for k, v in batch.items():
                if v.dtype.kind in "biuf":
                    dt = dtypes.get(k) if isinstance(dtypes, dict) else dtypes
                    out[k] = torch.as_tensor(v, dtype=dt, device=device)
                else:
                    out[k] = v
            yield out

    def count(self):
        return sum(1 for _ in self._source.read(self._rank, self._world))

    def take(self, limit=20):
        out = []
        for row in self._source.read(self._rank, self._world):
            if len(out) >= limit:
                break
            out.append(row)
        return out

    def __repr__(self):
        return f"DataShard(rank={self._rank}, world={self._world})"


class Dataset:
    """A dataset (ray.data.Dataset): made by from_items, from_numpy, range and read_*; given to a
    trainer's datasets=; read whole here (count, take, iter_rows, iter_batches) or per worker
    (train.get_dataset_shard)."""

    def __init__(self, source, shuffle=False, seed=None):
        self._source = source
        self._shuffle, self._seed = shuffle, seed

    def random_shuffle(self, *, seed=None):
        """The same rows, shuffled per worker and per epoch when read (see the module's doc)."""
        return Dataset(self._source, True, seed)

    def _local(self):
        return DataShard(self._source, 0, 1, self._shuffle, self._seed)

    def count(self):
        return self._source.count()

    def take(self, limit=20):
        return self._local().take(limit)

    def take_all(self):
        return list(self._local().iter_rows())

    def iter_rows(self):
        return self._local().iter_rows()

    def iter_batches(self, **kw):
        return self._local().iter_batches(**kw)

    def iter_torch_batches(self, **kw):
        return self._local().iter_torch_batches(**kw)

    def plan(self, key, blocks):
        """(what travels in the datasets file: a _Plan, {block file name: bytes}) for a job of
        `blocks` workers; `key` names the dataset's block files."""
        source, files = self._source.plan(key, max(1, blocks))
        return _Plan(source, self._shuffle, self._seed), files

    def __repr__(self):
        return f"Dataset({type(self._source).__name__.strip('_')})"


class _Plan:
    """A dataset as it travels to the workers: the source's small description (no rows)."""

    def __init__(self, source, shuffle, seed):
        self.source, self.shuffle, self.seed = source, shuffle, seed

    def shard(self, rank, world):
        return DataShard(self.source, rank, world, self.shuffle, self.seed)


def from_items(items):
    """A dataset of `items` (a list): dicts are rows, anything else the row {"item": x}."""
    items = list(items)
    return Dataset(_Rows([x if isinstance(x, dict) else {"item": x} for x in items]))


def from_numpy(ndarrays):
    """A dataset of the rows of a numpy array (each the row {"data": a[i]}), or of a list of
    arrays one after another."""
    arrays = ndarrays if isinstance(ndarrays, (list, tuple)) else [ndarrays]
    return Dataset(_Rows([{"data": row} for a in arrays for row in a]))


def range(n):  # noqa: A001 - Ray's name
    """A dataset of the rows {"id": 0} .. {"id": n - 1}, made by the workers themselves."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("range(n): n must be an integer >= 0")
    return Dataset(_Range(n))


def read_csv(paths):
    """CSV files (a header line, then rows; numbers read as int or float): files or
    directories every node sees."""
    return Dataset(_Files("csv", _files(paths, "csv")))


def read_json(paths):
    """JSON Lines files (one object per line), or JSON files each holding one array."""
    return Dataset(_Files("json", _files(paths, "json")))


def read_text(paths):
    """Text files, one row {"text": line} per line."""
    return Dataset(_Files("text", _files(paths, "text")))
