"""Writing a file whole: the one way ember replaces a file it owns (kernel caches, calibrations,
measured peaks, traces, drawings).

`write_atomic(path, data)` writes ``data`` to a temporary file in the target's folder, then
renames it over the target (`os.replace`), so a reader, another process included, sees the old
file or the new one, never half of one; on failure the temporary file is removed and the error
raised, the target untouched. The file gets the permissions a plain ``open(path, "w")`` would
(``mkstemp`` alone makes it private). Checkpoints (io/checkpoint.py) add an fsync before the
rename and write through safetensors, so they keep their own path.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def write_atomic(path, data: bytes | str) -> Path:
    """Replace ``path`` with ``data`` (str is written as UTF-8) in one step; returns the path."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
