"""Packing a working directory for code that travels (standard library only).

pack_directory(path) returns a tar.gz whose bytes, and so whose SHA-256 (the package's name on
the server), stay the same as long as the files kept do: names sorted, times, owners and gzip
header zeroed. directory_signature() tells an unchanged directory without packing it: fit()
then only asks the server about the package it remembers (~/.cache/trainyard/packages.json). Left out: VCS directories and files (.git, .hg, .svn, .gitignore), __pycache__
and *.pyc, and what .gitignore / .trainyardignore files say - a subset of gitignore: one glob per
line, '#' comments, a trailing '/' for directories only, a '/' inside anchoring the pattern to
the ignore file's directory; no '!' negation (such lines are skipped).
"""

import fnmatch
import gzip
import hashlib
import io
import json
import os
import stat
import tarfile

__all__ = ["pack_directory", "IgnoreRules", "PackageTooLarge", "DEFAULT_MAX_BYTES",
           "directory_signature", "remembered_package", "remember_package"]

DEFAULT_MAX_BYTES = 100 * 1024 * 1024
ALWAYS_LEFT_OUT = (".git", ".hg", ".svn", ".gitignore", "__pycache__", "*.pyc")
IGNORE_FILES = (".gitignore", ".trainyardignore")


class PackageTooLarge(ValueError):
    """The packed directory is over the size cap."""


class IgnoreRules:
    """Patterns of the ignore files met so far, each scoped to the directory it came from."""

    def __init__(self):
        self.rules = [("", p, False, False) for p in ALWAYS_LEFT_OUT]

    def add_file(self, path, base):
        """Adds the patterns of ignore file `path`, relative to `base` ('' for the top)."""
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            self.add(line, base)

    def add(self, line, base=""):
        p = line.strip()
        if not p or p.startswith("#") or p.startswith("!"):
            return
        dir_only = p.endswith("/")
        p = p.rstrip("/")
        anchored = "/" in p
        p = p.lstrip("/")
        if p:
            self.rules.append((base, p, dir_only, anchored))

    def ignored(self, rel, is_dir):
        """Whether `rel` (a '/' separated path relative to the top) is left out."""
        name = rel.rsplit("/", 1)[-1]
        for base, pat, dir_only, anchored in self.rules:
            if dir_only and not is_dir:
                continue
            if base and not rel.startswith(base + "/"):
                continue
            if anchored:
                sub = rel[len(base) + 1:] if base else rel
                if fnmatch.fnmatchcase(sub, pat):
                    return True
            elif fnmatch.fnmatchcase(name, pat):
                return True
        return False


class KeepAll(IgnoreRules):
    """No rule at all: a checkpoint directory travels whole."""

    def __init__(self):
        self.rules = []

    def add_file(self, path, base):
        pass


def list_files(top, keep_all=False):
    """The (relative path, absolute path) pairs pack_directory keeps, sorted."""
    top = os.path.abspath(top)
    rules = KeepAll() if keep_all else IgnoreRules()
    kept = []

    def walk(rel_dir):
        absdir = os.path.join(top, rel_dir) if rel_dir else top
        for name in IGNORE_FILES:
            if os.path.isfile(os.path.join(absdir, name)):
                rules.add_file(os.path.join(absdir, name), rel_dir)
        for name in sorted(os.listdir(absdir)):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            full = os.path.join(absdir, name)
            is_dir = os.path.isdir(full) and not os.path.islink(full)
            if rules.ignored(rel, is_dir):
                continue
            kept.append((rel, full))
            if is_dir:
                walk(rel)

    walk("")
    return kept


def pack_directory(path, max_bytes=DEFAULT_MAX_BYTES, keep_all=False, what="working_dir",
                   extra=None):
    """The tar.gz of directory `path` (bytes); keep_all: every file, no ignore rule (a
    checkpoint); extra: {name: bytes} of files added at the top (after the directory's, which
    they replace). Raises PackageTooLarge over max_bytes."""
    if not os.path.isdir(path):
        raise NotADirectoryError(f"{what} {path!r} is not a directory")
    raw = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.GNU_FORMAT) as tar:
            for rel, full in list_files(path, keep_all):
                if extra and rel in extra:
                    continue
                st = os.lstat(full)
                info = tarfile.TarInfo(rel)
                info.mtime = 0
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mode = stat.S_IMODE(st.st_mode)
                if stat.S_ISDIR(st.st_mode):
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                elif stat.S_ISLNK(st.st_mode):
                    info.type = tarfile.SYMTYPE
                    info.linkname = os.readlink(full)
                    tar.addfile(info)
                elif stat.S_ISREG(st.st_mode):
                    info.size = st.st_size
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
                if raw.tell() > max_bytes:
                    break
            for name, blob in sorted((extra or {}).items()):
                info = tarfile.TarInfo(name)
                info.mtime = 0
                info.mode = 0o644
                info.size = len(blob)
                tar.addfile(info, io.BytesIO(blob))
    data = raw.getvalue()
    if len(data) > max_bytes:
        raise PackageTooLarge(
            f"{what} {path!r} packs to more than {max_bytes} bytes (the cap): leave large "
            f"files out with a .trainyardignore, or raise the cap")
    return data


def directory_signature(path, extra=None):
    """A hash of what pack_directory would read (names, types, modes, sizes, modification
    times, link targets, and the extra files' contents), cheap to compute: equal signatures
    mean an unchanged directory, as make and rsync judge it."""
    h = hashlib.sha256(os.path.abspath(path).encode())
    for name, blob in sorted((extra or {}).items()):
        h.update(json.dumps([name, hashlib.sha256(blob).hexdigest()]).encode())
    for rel, full in list_files(path):
        st = os.lstat(full)
        link = os.readlink(full) if stat.S_ISLNK(st.st_mode) else ""
        h.update(json.dumps([rel, st.st_mode, st.st_size, st.st_mtime_ns, link]).encode())
    return h.hexdigest()


def _cache_file():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "trainyard", "packages.json")


def remembered_package(signature):
    """The SHA-256 of the package last made from a directory with this signature, or None."""
    try:
        with open(_cache_file(), encoding="utf-8") as f:
            return json.load(f).get(signature)
    except (OSError, ValueError, AttributeError):
        return None


def remember_package(signature, sha256, keep=64):
    """Notes that `signature` packed to `sha256` (the newest `keep` entries are kept)."""
    path = _cache_file()
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
        if not isinstance(table, dict):
            table = {}
    except (OSError, ValueError):
        table = {}
    table.pop(signature, None)
    table[signature] = sha256
    table = dict(list(table.items())[-keep:])
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(table, f)
        os.replace(tmp, path)
    except OSError:
        pass  # only a cache
