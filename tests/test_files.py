"""ember._files: whole-file replacement, temporaries named after their writer, and the removal of
the temporaries and private folders that killed processes leave."""

import os
import stat
import subprocess
import sys
import textwrap
import time

from ember import _files
from ember._files import private_directory, remove_stale_temporaries, write_atomic


def _killed_writes(path, count):
    """``count`` processes each killed inside write_atomic, after writing, before the rename."""
    script = textwrap.dedent(
        f"""
        import os, signal
        from ember import _files

        def die(src, dst):
            os.kill(os.getpid(), signal.SIGKILL)

        _files.os.replace = die
        _files.write_atomic({str(path)!r}, b"x" * 100_000)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(count):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env)
        assert done.returncode == -9, done.stderr


def test_the_next_write_removes_temporaries_of_killed_writers(tmp_path):
    target = tmp_path / "peaks.json"
    write_atomic(target, "{}")
    _killed_writes(target, 4)
    # each killed writer removed the temporary of the one killed before it: one is left
    leftovers = sorted(n for n in os.listdir(tmp_path) if n != "peaks.json")
    assert len(leftovers) == 1
    assert leftovers[0].startswith(".peaks.json.") and leftovers[0].endswith(".tmp")
    # another target's, a live writer's (this process) and a foreign file stay
    other = tmp_path / f".other.json.{_files._host()}-999999999-00000000.tmp"
    other.write_text("")
    mine = tmp_path / f".peaks.json.{_files._host()}-{os.getpid()}-0000abcd.tmp"
    mine.write_text("")
    foreign = tmp_path / ".peaks.json.notours.tmp"
    foreign.write_text("")
    write_atomic(target, "{}")
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["peaks.json", other.name, mine.name, foreign.name]
    )
    assert remove_stale_temporaries(tmp_path) == 1  # any target: the other one's dead writer
    assert not other.exists()


def test_temporaries_of_another_host_go_after_a_day(tmp_path):
    young = tmp_path / ".f.0badc0de-1-00000000.tmp"
    old = tmp_path / ".f.0badc0de-2-00000000.tmp"
    for path in (young, old):
        path.write_text("")
    os.utime(old, (time.time() - 2 * 86400,) * 2)
    assert remove_stale_temporaries(tmp_path, "f") == 1
    assert young.exists() and not old.exists()


def test_written_files_get_the_umask_and_symlinked_temporaries_are_refused(tmp_path):
    mask = os.umask(0o027)
    try:
        path = write_atomic(tmp_path / "a", b"1")
    finally:
        os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["a"]


def test_private_folders_are_removed_at_exit_or_by_the_next_process(tmp_path):
    script = textwrap.dedent(
        """
        import os, signal, sys
        from ember._files import private_directory

        path = private_directory("ember-test-private")
        (path / "x.so").write_bytes(b"1")
        print(path, flush=True)
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(how):
        done = subprocess.run(
            [sys.executable, "-c", script, how], capture_output=True, text=True, env=env
        )
        return done.stdout.strip()

    exited = run("exit")
    assert exited and not os.path.exists(exited)  # removed at exit
    killed = run("kill")
    assert os.path.isdir(killed)  # a killed process cannot clean up ...
    fresh = private_directory("ember-test-private")
    assert not os.path.exists(killed)  # ... the next one does
    assert fresh.is_dir() and stat.S_IMODE(fresh.stat().st_mode) == 0o700
