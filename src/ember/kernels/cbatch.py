"""Building many kernels in one compiler run: a graph's fused loops, before they are loaded.

A compiler run has a fixed cost (starting the driver, the compiler proper and the linker, and
linking) of about as much as compiling one small loop, and a graph has tens of loops. So the
code generator and the C graph runner first hand every loop source a graph needs to
`build_together`, which compiles the ones that are neither loaded nor on disk, per set of
flags, as one translation unit, then gives each its own cache entry (kernels/ccompile.py):
``<key>.so`` is a hard link to (else a copy of) the shared library, with its ``<key>.sha256``.
`ccompile.load` then finds each loop on disk as if it had been built alone, and takes its
function under its batched name (`ccompile.batched_symbol`).

One translation unit holds the sources apart by renaming: every name a source defines at file
scope (functions, variables, struct tags, typedefs: `defined_names`) is suffixed with the
start of its key, by ``#define`` before the source and ``#undef`` after it, so two loops' ``part``
or ``struct job`` never meet, and each ``fused`` becomes ``fused_<key[:16]>``. System headers
are included once, first; a source's own object-like macros must agree with the others'.

This is only a saving. A source this module cannot read (`defined_names` is None), one whose
macros disagree, a group whose compile fails: each is left to `ccompile.load`, which builds it
alone and reports its errors as before. After a failed group the same flags are not batched
again in this process (a machine without glibc's vector math library fails every group that
links it).
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from .._files import create_temporary, write_atomic
from . import ccompile

__all__ = ["MAX_GROUP", "build_together", "combine", "defined_names"]

# sources per compiler run: the run's time grows with its sources, and one graph's loops are
# built before its first call, so a huge group only delays that call as much as separate runs
MAX_GROUP = 64

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)")
_NAME = r"[A-Za-z_]\w*"
_LAST_NAME = re.compile(rf"({_NAME})\s*(?:\[[^\]]*\]\s*)*$")
_FUNCTION_POINTER = re.compile(rf"\(\s*\*\s*({_NAME})\s*\)\s*\(")
_STRUCT_TAG = re.compile(rf"^(?:static\s+)?(struct|union|enum)\s+({_NAME})\s*$")
_INCLUDE = re.compile(r"\s*#\s*include\s*<[\w./]+>\s*$")
_DEFINE = re.compile(rf"\s*#\s*define\s+({_NAME})(\(?)")
_UNREADABLE = object()

_failed_flags: set[tuple] = set()  # flag sets whose group failed in this process


def defined_names(source: str) -> list[str] | None:
    """The names ``source`` defines at file scope (functions, variables, struct, union and
    enum tags, typedefs), in order; prototypes of functions defined elsewhere (the C library's)
    define none. None when a file-scope statement is not one this reader understands."""
    text = _COMMENTS.sub(" ", source)
    lines = []
    for line in text.splitlines():  # (preprocessor lines, continued ones included, set aside)
        if lines and lines[-1] is None:
            lines[-1] = None if line.rstrip().endswith("\\") else ""
            continue
        if line.lstrip().startswith("#"):
            lines.append(None if line.rstrip().endswith("\\") else "")
        else:
            lines.append(line)
    text = "\n".join(line or "" for line in lines)
    names: list[str] = []
    depth, statement = 0, []
    for char in text:
        if depth == 0:
            if char in ";{":
                name = _classify("".join(statement).strip(), char)
                if name is _UNREADABLE:
                    return None
                if name is not None:
                    names.append(name)
                statement = []
                if char == "{":
                    depth = 1
            elif char == "}":
                return None
            else:
                statement.append(char)
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
    if depth or "".join(statement).strip():
        return None
    return names


def _classify(statement: str, end: str):
    """The name a file-scope ``statement`` (ended by ``;`` or ``{``) defines: a str, None (a
    prototype, an ``extern`` declaration, what a ``}`` leaves before ``;``), or `_UNREADABLE`."""
    statement = " ".join(_ATTRIBUTE.sub(" ", statement).split())
    if re.search(r"\(\s*\*", statement.split(")", 1)[0]) and not statement.startswith("typedef"):
        return _UNREADABLE  # (a function pointer variable, a function returning one)
    if not statement:
        return None  # (the ``;`` after a struct's or an initializer's closing brace)
    if statement.startswith("typedef"):
        if end == "{":
            return _UNREADABLE  # (a typedef of a struct defined in place: not written here)
        pointer = _FUNCTION_POINTER.search(statement)
        match = pointer or _LAST_NAME.search(statement)
        return match.group(1) if match else _UNREADABLE
    if "=" in statement:  # a variable with an initializer (``= {`` ends the head with ``{``)
        match = _LAST_NAME.search(statement.split("=", 1)[0].strip())
        return match.group(1) if match else _UNREADABLE
    tag = _STRUCT_TAG.match(statement)
    if tag:
        return tag.group(2) if end == "{" else None  # (``struct job;`` defines nothing)
    if "(" in statement:
        head = statement.split("(", 1)[0].strip()
        match = _LAST_NAME.search(head)
        if match is None:
            return _UNREADABLE  # (a function returning a function pointer, ...)
        if end == "{" or head.startswith("static"):
            return match.group(1)  # (a definition, or the prototype of one of the source's own)
        return None  # a prototype of a function defined elsewhere
    if end == "{" or statement.startswith("extern"):
        return _UNREADABLE if end == "{" else None
    match = _LAST_NAME.search(statement)  # a variable without an initializer
    return match.group(1) if match else _UNREADABLE


def combine(sources: dict[str, str]) -> tuple[str, list[str]]:
    """One translation unit of ``sources`` ({key: source}) and the keys it holds: each
    source's names renamed (`ccompile.batched_symbol`), the system headers first. A source
    that `defined_names` cannot read, or whose macros differ from an earlier one's, is left
    out."""
    includes: dict[str, None] = {}
    macros: dict[str, str] = {}
    parts, kept = [], []
    for key, source in sources.items():
        names = defined_names(source)
        if names is None:
            continue
        lines, own = [], {}
        for line in source.splitlines():
            if _INCLUDE.match(line):
                includes.setdefault(" ".join(line.split()), None)
                continue
            define = _DEFINE.match(line)
            if define:
                name = define.group(1)
                own[name] = " ".join(line.split())
                lines += [f"#ifndef {name}", line, "#endif"]
                continue
            lines.append(line)
        if any(macros.get(name, text) != text for name, text in own.items()):
            continue  # (two definitions of one macro: this source is built alone)
        if any(name in macros or name in own for name in names):
            continue  # (a name both defined and a macro)
        macros.update(own)
        renames = [f"#define {n} {ccompile.batched_symbol(n, key)}" for n in dict.fromkeys(names)]
        undo = [f"#undef {n}" for n in dict.fromkeys(names)]
        parts.append("\n".join([*renames, *lines, *undo]))
        kept.append(key)
    return "\n".join([*includes, *parts]) + "\n", kept


def build_together(requests) -> int:
    """Build the libraries of ``requests`` ((source, flags) pairs, flags as `ccompile.load`
    takes them) that are neither loaded in this process nor on disk, as few compiler runs as
    their flags allow; returns how many sources were built. Errors are left to `ccompile.load`
    (a source this could not build is built alone there)."""
    cc = ccompile._compiler()
    if cc is None or ccompile._supported(cc) is None:
        return 0
    directory = ccompile.cache_dir()
    # sources compiled with the same options are built together, linked with every library
    # any of them needs (one that does not need glibc's vector math loses nothing by it)
    groups: dict[tuple, dict[str, str]] = {}
    libraries: dict[tuple, dict[str, None]] = {}
    for source, flags in requests:
        flags = ccompile.effective_flags(flags)
        key = ccompile.library_key(cc, source, flags)
        if key in ccompile._libraries or key in ccompile._failures:
            continue
        if (directory / f"{key}.so").exists():
            continue  # (`load` checks it, and rebuilds a damaged one alone)
        options = tuple(f for f in flags if not f.startswith("-l"))
        groups.setdefault(options, {})[key] = source
        libraries.setdefault(options, {}).update(dict.fromkeys(f for f in flags if f[:2] == "-l"))
    built = 0
    for options, members in groups.items():
        flags = options + tuple(sorted(libraries[options], key=_link_order))
        if flags in _failed_flags:
            continue
        keys = list(members)
        for start in range(0, len(keys), MAX_GROUP):
            chunk = {k: members[k] for k in keys[start : start + MAX_GROUP]}
            if len(chunk) < 2:
                continue  # (one source: `load` builds it, as it would have)
            built += _build_group(cc, flags, chunk, directory)
            if flags in _failed_flags:
                break
    return built


def _link_order(library: str) -> int:
    """Libraries after those that need them: libmvec's vector functions call libm's."""
    return 1 if library == "-lm" else 0


def _build_group(cc, flags: tuple, members: dict[str, str], directory: Path) -> int:
    source, keys = combine(members)
    if len(keys) < 2:
        return 0
    group_key = ccompile.library_key(cc, source, flags)
    # a name of this build's own: another process building the same group at once (the ranks
    # of an MPI job, pytest's workers) removes its group library when it has linked it
    library = directory / f"{group_key}-{os.getpid()}-{uuid.uuid4().hex[:8]}.so"
    linked = 0
    with ccompile._lock:
        try:
            ccompile._build(cc, source, flags, library)
        except ccompile.CompileError:
            _failed_flags.add(flags)
            library.with_suffix(".failed.c").unlink(missing_ok=True)
            return 0
        try:
            digest = library.with_suffix(".sha256").read_bytes()
            for key in keys:  # each its own entry: its hash, then its library
                target = directory / f"{key}.so"
                write_atomic(target.with_suffix(".sha256"), digest, 0o644, sweep=False)
                try:
                    _link_or_copy(library, target)
                except OSError:
                    target.with_suffix(".sha256").unlink(missing_ok=True)
                    raise
                linked += 1
        except OSError:
            pass  # (only a saving: `ccompile.load` builds what is not linked)
        finally:
            library.unlink(missing_ok=True)
            library.with_suffix(".sha256").unlink(missing_ok=True)
        ccompile.stats.batched += linked
    return linked


def _link_or_copy(library: Path, target: Path) -> None:
    """``target`` made, whole, the same file as ``library``: a hard link where the file system
    has them, else a copy."""
    tmp = Path(create_temporary(target.parent, target.name, 0o644, sweep=False))
    try:
        tmp.unlink()
        try:
            os.link(library, tmp)
        except OSError:
            tmp.write_bytes(library.read_bytes())
            os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
