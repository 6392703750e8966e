"""Choices measured once per machine and kept on disk: which kernel or layout runs a geometry.

Several kernels time their candidates on the machine the first time a geometry is built (a
convolution step's layout, kernels/cconv_step_choice.py; whether the fused inverted residual
pays, kernels/cinverted_residual.py) and keep the answer, so later builds and later processes
read it instead of timing again. `ChoiceCache` owns that file for one kind of choice: JSON in
ember's cache directory (`ccompile.cache_dir`), named and keyed by the machine (a string the
caller builds from the CPU model, the core count and its kernels' C source), so another
machine or a changed kernel measures again.

The file is not trusted: one that is missing, not this user's own (`_files.read_own_file`), of
another machine or format, or that holds a value the caller's ``decode`` refuses is ignored
whole and replaced at the next write. Writes are atomic and merge what other processes wrote
since this one read the file.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

from .._files import OWN_FILE_MODE, read_own_file, write_atomic

__all__ = ["ChoiceCache"]


class ChoiceCache:
    """One kind of measured choice: geometry key (a string) -> value.

    ``stem`` names the file; ``machine_key()`` says whose measurements these are;
    ``decode(stored)`` turns a JSON value back into a choice or raises ValueError for one that
    `encode` could not have written; ``encode(choice)`` makes a choice JSON (the identity by
    default)."""

    def __init__(
        self,
        stem: str,
        machine_key: Callable[[], str],
        format_version: int,
        decode: Callable[[Any], Any],
        encode: Callable[[Any], Any] = lambda choice: choice,
    ):
        self.stem = stem
        self.machine_key = machine_key
        self.format_version = format_version
        self._decode = decode
        self._encode = encode
        self._lock = threading.Lock()
        self._loaded: dict = {}  # path -> {key: choice}, what this process has read or made

    def path(self):
        from .ccompile import cache_dir

        digest = hashlib.sha256(self.machine_key().encode()).hexdigest()[:16]
        return cache_dir() / f"{self.stem}-{digest}.json"

    def read(self, path) -> dict:
        """The choices in ``path``: {} where it is missing, not this user's own, unreadable,
        of another machine or format, or holds any value ``decode`` refuses."""
        raw = read_own_file(path)  # (a cache file someone else could write is not read)
        if raw is None:
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or set(data) != {"format", "machine", "choices"}:
            return {}
        if data["format"] != self.format_version or data["machine"] != self.machine_key():
            return {}
        stored = data["choices"]
        if not isinstance(stored, dict):
            return {}
        try:
            return {key: self._decode(value) for key, value in stored.items()}
        except ValueError:
            return {}

    def _write(self, path, choices: dict) -> None:
        data = {
            "format": self.format_version,
            "machine": self.machine_key(),
            "choices": {key: self._encode(choice) for key, choice in choices.items()},
        }
        try:
            write_atomic(path, json.dumps(data), OWN_FILE_MODE)
        except OSError:
            pass  # (an unwritable cache directory: measured again by the next process)

    def get(self, key: str):
        """The kept choice for ``key``, or None where this machine has not measured it."""
        path = self.path()
        with self._lock:
            choices = self._loaded.get(str(path))
            if choices is None:
                choices = self._loaded[str(path)] = self.read(path)
            return choices.get(key)

    def put(self, key: str, choice) -> None:
        """Keep ``choice`` for ``key``, in this process and in the file (with the choices
        other processes wrote since it was read)."""
        path = self.path()
        with self._lock:
            choices = self.read(path)
            choices.update(self._loaded.get(str(path), {}))
            choices[key] = choice
            self._loaded[str(path)] = choices
            self._write(path, choices)

    def forget(self) -> None:
        """Drop what this process has read, so the next `get` reads the file again (as a new
        process would)."""
        with self._lock:
            self._loaded.clear()
