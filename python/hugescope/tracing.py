"""Traces of real programs, and imports of other tools' traces.

Three ways in (see ``docs/tracing.md``):

- ``cc(args)`` compiles with clang's sanitizer-coverage load/store hooks and
  links hugescope's C runtime; ``trace_program(argv, out)`` runs such a
  program with ASLR disabled and converts what the runtime recorded into a
  ``.hst`` with the program's regions (named from ``/proc/PID/maps``);
- ``trace_program(argv, out, valgrind=True)`` runs any binary under valgrind's
  lackey tool and streams its output through a pipe into the trace;
- ``import_trace(fmt, file, out)`` converts a lackey log, a ChampSim trace
  (plain or ``.xz``) or a text/CSV address list.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from typing import Dict, List, Optional, Sequence

from . import _core, units
from ._io import check_output, note_written
from .errors import HugescopeError

#: Coverage flags: trace-loads/trace-stores need a base coverage kind, and
#: inline-8bit-counters is the cheapest (a counter increment per edge, no call).
COVERAGE_FLAGS = ["-fsanitize-coverage=inline-8bit-counters,trace-loads,trace-stores"]
#: Link flags: the runtime's buffers are per thread (pthread), and clang's own
#: sanitizer runtime is left out: hugescope's runtime defines every hook, and
#: clang's would add ~10 MiB of BSS and C++ libraries to the traced address space.
RUNTIME_LIBS = ["-lpthread", "-fno-sanitize-link-runtime"]
#: Compiler arguments that stop before linking: no runtime object then.
_NO_LINK = {"-c", "-S", "-E", "-M", "-MM", "-fsyntax-only"}
#: personality(2) flag that turns off address-space randomisation (as
#: ``hugescope run`` does through hugescope-linux's launcher).
ADDR_NO_RANDOMIZE = 0x0040000


def find_clang() -> str:
    """The clang to compile with: ``$HUGESCOPE_CLANG``, else ``clang`` (or the
    newest ``clang-NN``) on ``PATH``."""
    env = os.environ.get("HUGESCOPE_CLANG")
    if env:
        path = shutil.which(env)
        if not path:
            raise HugescopeError(f"HUGESCOPE_CLANG: '{env}' is not an executable")
        return path
    path = shutil.which("clang")
    if path:
        return path
    for v in range(30, 13, -1):
        path = shutil.which(f"clang-{v}")
        if path:
            return path
    raise HugescopeError("clang not found: install it (apt-get install clang; 'make build' does as root) "
                         "or set HUGESCOPE_CLANG")


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hugescope")


def runtime_object() -> str:
    """Path of the compiled C runtime, built on first use into the cache
    directory (keyed by the source's hash, so an updated hugescope rebuilds it)."""
    src = _core.tracer_runtime_source()
    digest = hashlib.sha256(src.encode()).hexdigest()[:16]
    d = _cache_dir()
    obj = os.path.join(d, f"hugescope_trace-{digest}.o")
    if os.path.exists(obj):
        return obj
    os.makedirs(d, exist_ok=True)
    compiler = shutil.which("cc") or shutil.which("gcc") or find_clang()
    with tempfile.TemporaryDirectory(dir=d, prefix=".build-") as tmp:
        c = os.path.join(tmp, "hugescope_trace.c")
        with open(c, "w") as f:
            f.write(src)
        o = os.path.join(tmp, "hugescope_trace.o")
        r = subprocess.run([compiler, "-O2", "-fPIC", "-fno-omit-frame-pointer", "-c", c, "-o", o], capture_output=True, text=True)
        if r.returncode != 0:
            first = (r.stderr.strip().splitlines() or ["(no message)"])[0]
            raise HugescopeError(f"cannot compile the tracing runtime with {compiler}: {first}")
        # Rename into place: concurrent first uses each build, one wins whole.
        os.replace(o, obj)
    return obj


#: Why ``hugescope trace --pid`` is refused (issue #14: "where feasible"). An
#: access trace needs every load and store: the compiler path needs the program
#: built with the hooks from its start, valgrind must run it from its first
#: instruction, and neither can be attached to a running process. A sampled
#: page-level access *profile* is not feasible on kernels like this one either:
#: pagemap has no accessed bit, and idle page tracking, soft-dirty and DAMON
#: virtual-address monitoring are often not built in; clear_refs + smaps give
#: access per VMA only (what ``hugescope daemon`` uses).
PID_REFUSAL = ("trace --pid: a running process cannot be traced (an access trace needs instrumentation or "
               "valgrind from the program's start); start it under 'hugescope trace -- PROG' instead, or use "
               "'hugescope daemon --pid PID' to run a policy on it live, or 'hugescope coverage PID' to see its "
               "huge pages")


def refuse_pid(argv: Sequence[str]) -> None:
    """Raise ``HugescopeError(PID_REFUSAL)`` when ``--pid`` is among the trace
    options (before ``--``)."""
    opts = list(argv)[:list(argv).index("--")] if "--" in argv else list(argv)
    if any(a == "--pid" or a.startswith("--pid=") for a in opts):
        raise HugescopeError(PID_REFUSAL)


#: Allocation sites (issue #38): line tables (no other debug data, no change
#: to the code) name them "function file:line", and frame pointers let the
#: runtime read the call path without loading an unwinder library (which
#: would move the traced run's mappings). Added unless the user chose a -g
#: level (then only the frame pointers). DWARF 4: valgrind (the other tracing
#: path, on the same binary) stops at DWARF 5's newer forms.
LINE_TABLES = ["-gline-tables-only", "-gdwarf-4"]
FRAME_POINTERS = ["-fno-omit-frame-pointer"]
SITE_FLAGS = LINE_TABLES + FRAME_POINTERS


def cc_command(args: Sequence[str]) -> List[str]:
    """The clang command line ``hugescope cc ARGS`` runs."""
    args = list(args)
    debug = FRAME_POINTERS if any(a.startswith("-g") for a in args) else SITE_FLAGS
    cmd = [find_clang(), *COVERAGE_FLAGS, *debug, *args]
    if not any(a in _NO_LINK for a in args):
        cmd += [runtime_object(), *RUNTIME_LIBS]
    return cmd


def _cc_output(args: List[str]):
    """Where clang would write: (index of the path in ``args``, path), from
    ``-o PATH``, ``-oPATH`` or ``--output[=]PATH``; (None, "a.out") when
    linking without one; (None, None) when compiling objects without one
    (clang names them after the sources)."""
    for i, a in enumerate(args):
        if a in ("-o", "--output") and i + 1 < len(args):
            return i + 1, args[i + 1]
        if a.startswith("--output="):
            return i, a[len("--output="):]
        if a.startswith("-o") and len(a) > 2:
            return i, a[2:]
    return (None, None) if any(a in _NO_LINK for a in args) else (None, "a.out")


#: The plain (uninstrumented) build ``cc`` writes beside a program it links
#: from sources: ``PROG`` + this. ``advise`` measures it (issue #36: the
#: instrumented build ran up to 2.5x slower than the one the user runs).
PLAIN_SUFFIX = ".plain"
#: Inputs ``cc`` can rebuild without the hooks: C, C++ and assembly sources.
#: An object or archive compiled by ``hugescope cc`` holds the hooks' calls
#: and cannot be linked without the runtime, so a link of objects gets no
#: plain build (``advise --plain`` takes one built separately).
_SOURCE_EXTS = (".c", ".cc", ".cpp", ".cxx", ".c++", ".C", ".s", ".S", ".i", ".ii")
#: A string only hugescope's runtime puts in a binary (the variable it reads).
_RUNTIME_MARK = b"HUGESCOPE_TRACE_OUT"


def plain_path(program: str) -> str:
    """Where ``cc`` writes the plain build of ``program``."""
    return program + PLAIN_SUFFIX


def is_instrumented(path: str) -> bool:
    """True when the file at ``path`` holds hugescope's tracing runtime (it was
    linked by ``hugescope cc``); read in chunks, so large binaries cost no memory."""
    tail, n = b"", len(_RUNTIME_MARK)
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return False
            if _RUNTIME_MARK in tail + chunk:
                return True
            tail = chunk[-(n - 1):]


def _plain_command(args: List[str], i: Optional[int], out: str, target: str) -> Optional[List[str]]:
    """The clang command of the plain build (the user's arguments alone, the
    output renamed to ``plain_path``), or None when the build links anything
    but sources (objects built with the hooks need the runtime)."""
    files = [a for j, a in enumerate(args) if j != i and not a.startswith("-") and os.path.isfile(a)]
    if not files or any(not a.endswith(_SOURCE_EXTS) for a in files) or any(a in _NO_LINK for a in args):
        return None
    plain = plain_path(target)
    if i is None:
        return [find_clang(), *args, "-o", plain]
    return [find_clang(), *args[:i], args[i][: len(args[i]) - len(out)] + plain, *args[i + 1:]]


def cc(args: Sequence[str]) -> int:
    """Compile (and link) like clang with the tracing instrumentation and
    runtime; returns clang's exit status. The output goes through the same
    checks as every output of hugescope first: a trace, a results file, a
    device, a symbolic link or one of the sources is never replaced by an
    executable (an existing executable or object may be).

    When it links a program from sources only, it also builds the program
    without the hooks, with the same arguments, into ``PROG.plain``
    (``plain_path``): the build ``advise`` measures."""
    args = list(args)
    i, out = _cc_output(args)
    plain = None
    if out is not None and out != "-":
        # Every file argument but the output's own slot: `-o p.c p.c` names
        # a source as the output, and is refused.
        sources = [a for j, a in enumerate(args) if j != i and not a.startswith("-") and os.path.isfile(a)]
        target = check_output(out, "elf", sources)
        if i is not None and target != out:
            # --follow-symlinks: clang writes to the link's target.
            args[i] = args[i][: len(args[i]) - len(out)] + target
        plain = _plain_command(args, i, target if i is not None else out, target)
        if plain is not None:
            check_output(plain_path(target), "elf", sources)
    status = subprocess.call(cc_command(args))
    if status != 0 or plain is None:
        return status
    return subprocess.call(plain)


def ldflags() -> List[str]:
    """What to add when linking objects compiled with ``COVERAGE_FLAGS``."""
    return [runtime_object(), *RUNTIME_LIBS]


PR_SET_PDEATHSIG = 1
#: Bytes of the output's file system a traced program's records never use:
#: recording stops there (the trace says so) instead of filling the disk.
DISK_RESERVE = 1 << 30


def _disk_reserve() -> int:
    """``$HUGESCOPE_TRACE_RESERVE`` read as every size is (``units.parse_size``:
    "2GiB", "0"), else ``DISK_RESERVE``. The runtime's own reading (strtoull)
    took "2GiB" as 2 bytes and "x" as 0, turning the disk check off; the
    runtime gets the checked number of bytes."""
    text = os.environ.get("HUGESCOPE_TRACE_RESERVE")
    if text is None:
        return DISK_RESERVE
    try:
        return units.parse_size(text)
    except ValueError as e:
        raise HugescopeError(f"HUGESCOPE_TRACE_RESERVE: {e}") from None


def _child_setup(parent: int):
    """What the traced program's process does between fork and exec: die
    with hugescope (PR_SET_PDEATHSIG, so even a SIGKILL of hugescope cannot
    leave a traced program writing records until the disk is full), and run
    without address-space randomisation (the personality survives exec)."""
    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        # The parent may have died between fork and prctl: then no signal
        # would ever come, so check it is still the one that forked us.
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent:
            os._exit(125)
        # A process group of its own: whatever the program forks stays in
        # it, and is ended with it (``_end_group``).
        os.setpgid(0, 0)
        _no_aslr(libc)
    return setup


def _end_group(proc: subprocess.Popen) -> None:
    """Wait until the traced program has exited, without reaping it (so its
    pid, and with it its process group, cannot be reused), then SIGKILL
    whatever it left running in its group: a forked child would otherwise
    outlive the trace and hold its pipes (``hugescope trace ... | cat``
    would wait for it)."""
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:
        return  # already reaped
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _no_aslr(libc) -> None:
    cur = libc.personality(0xFFFFFFFF)
    if cur == -1 or libc.personality((cur & 0xFFFFFFFF) | ADDR_NO_RANDOMIZE) == -1:
        os._exit(126)


def _program(argv: Sequence[str]) -> str:
    if not argv:
        raise HugescopeError("trace: give the program to run after '--' (hugescope trace -o OUT.hst -- ./prog args)")
    prog = argv[0]
    path = shutil.which(prog) if os.sep not in prog else (prog if os.access(prog, os.X_OK) and os.path.isfile(prog) else None)
    if not path:
        raise HugescopeError(f"program '{prog}': not found or not executable")
    return path


def _window(skip: int, record: Optional[int]) -> None:
    if skip < 0:
        raise HugescopeError(f"--skip: {skip} is negative")
    if record is not None and record < 1:
        raise HugescopeError(f"--record: {record} must be at least 1")


def _stop(proc: subprocess.Popen) -> None:
    """End a child we started and its process group (on an interrupt or an
    error), then reap it."""
    if proc.returncode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    proc.wait()


def trace_program(argv: Sequence[str], output: str, skip: int = 0, record: Optional[int] = None,
                  valgrind: bool = False, instructions: bool = False) -> Dict:
    """Run ``argv`` and write its data accesses to ``output`` (.hst).

    Without ``valgrind`` the program must have been built with ``cc`` (its
    runtime writes the records); with it, any binary runs under valgrind's
    lackey tool. ASLR is disabled in both, so the addresses hold for a later
    ``hugescope run``. ``skip``/``record`` trace a window of the accesses.
    Returns the trace summary plus ``exit_status`` (the program's).
    """
    _window(skip, record)
    reserve = _disk_reserve()
    path = _program(argv)
    check_output(output, "hst")
    name = os.path.basename(argv[0])
    params = {"argv": list(argv), "skip": skip, "record": record,
              "capture": "valgrind-lackey" if valgrind else "clang-sancov"}
    if valgrind:
        return _trace_valgrind(path, argv, output, name, params, skip, record, instructions)
    out_dir = os.path.dirname(os.path.abspath(output))
    # The raw records go next to the output (same file system, and the user
    # chose a place with room for the trace).
    tmp = tempfile.mkdtemp(prefix=".hugescope-trace-", dir=out_dir)
    try:
        raw, meta = os.path.join(tmp, "records"), os.path.join(tmp, "meta")
        env = dict(os.environ, HUGESCOPE_TRACE_OUT=raw, HUGESCOPE_TRACE_META=meta,
                   HUGESCOPE_TRACE_SKIP=str(skip), HUGESCOPE_TRACE_RECORD=str(record or 0))
        env["HUGESCOPE_TRACE_RESERVE"] = str(reserve)
        proc = subprocess.Popen([path, *argv[1:]], env=env, preexec_fn=_child_setup(os.getpid()))
        try:
            _end_group(proc)
            status = proc.wait()
        finally:
            _stop(proc)
        if not os.path.exists(raw) or not os.path.exists(meta):
            raise HugescopeError(f"program '{argv[0]}' wrote no trace records: build it with 'hugescope cc' "
                                 f"(or trace it with --valgrind)")
        s = json.loads(_core.tracer_convert(raw, meta, output, f"program:{name}", json.dumps(params)))
        note_written(output)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # The runtime stops recording rather than fill the disk; say so.
    s["truncated"] = "truncated" in json.loads(_core.trace_info(output, False))["header"].get("params", {})
    s["exit_status"] = status
    return s


def _trace_valgrind(path: str, argv: Sequence[str], output: str, name: str, params: Dict,
                    skip: int, record: Optional[int], instructions: bool) -> Dict:
    vg = shutil.which("valgrind")
    if not vg:
        raise HugescopeError("--valgrind: valgrind not found (apt-get install valgrind)")
    # lackey writes to valgrind's log: a pipe we read as it is written, so the
    # (large) text is never stored.
    r, w = os.pipe()
    try:
        cmd = [vg, "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}", path, *argv[1:]]
        proc = subprocess.Popen(cmd, pass_fds=(w,), preexec_fn=_child_setup(os.getpid()))
        os.close(w)
        w = -1
        # A child the program forks inherits valgrind's log descriptor: the
        # import would read until it exits. End the group when the program
        # ends, so the log reaches its end with it.
        import threading
        threading.Thread(target=_end_group, args=(proc,), daemon=True).start()
        try:
            s = json.loads(_core.import_trace("lackey", f"valgrind lackey output of {argv[0]}", output,
                                              f"program:{name}", json.dumps(params), skip, record,
                                              instructions, r))
            note_written(output)
            # A full window stops the import early: the rest of the log is
            # read and dropped so the program runs to its end (closing the
            # pipe instead would kill valgrind with SIGPIPE).
            while os.read(r, 1 << 16):
                pass
            status = proc.wait()
        finally:
            _stop(proc)
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
    s["exit_status"] = status
    return s


def import_trace(fmt: str, path: str, output: str, skip: int = 0, record: Optional[int] = None,
                 instructions: bool = False) -> Dict:
    """Convert a trace of another tool (``lackey``, ``champsim``, ``text``)
    into ``output`` (.hst). Returns the trace summary."""
    _window(skip, record)
    check_output(output, "hst", [path])
    params = {"source": os.path.basename(path), "skip": skip, "record": record}
    s = json.loads(_core.import_trace(fmt, path, output, f"imported:{fmt}", json.dumps(params),
                                      skip, record, instructions))
    note_written(output)
    return s


def convert_trace(path: str, output: str) -> Dict:
    """Rewrite a trace written by an older hugescope (format version 1 or 2,
    whose preamble checksum does not cover the version field) as the current
    version, records and markers unchanged. Returns the trace summary."""
    check_output(output, "hst", [path])
    s = json.loads(_core.convert_trace(os.fspath(path), os.fspath(output)))
    note_written(output)
    return s


def region_kind(header: Dict, name: str) -> Optional[str]:
    """The kind (heap, stack, anon, file, data, bss, code) of a region of a
    trace, from the region's ``kind`` field (absent means ``anon``); None for a
    name the header does not list."""
    for r in header.get("regions", []):
        if r.get("name") == name:
            return r.get("kind", "anon")
    return None
