"""The output folder of `lagrax run`: checked before the run, locked while it runs,
put in place in one rename at the end, and never lost.

Nothing is written into the output folder itself until the run is complete: the
results go to a temporary folder beside it, which replaces it in one rename
(the old folder is moved aside first and removed only after). A lock file beside
it (`.NAME.lock`, held with `fcntl.flock`, so a killed run leaves no stale lock)
keeps two runs from writing the same folder. Ctrl-C at any moment before the
results are in place leaves nothing behind (during the renames, it undoes
them).
"""

import contextlib
import errno
import fcntl
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from pathlib import Path

from ._config import ConfigError


MARKER = "summary.json"  # every folder lagrax writes has one


def check_out(out: Path, force: bool) -> Path:
    """The output folder, checked before any work: a folder lagrax may create or
    (with `force`) replace. ConfigError (exit status 2) says why not."""
    if out.name in ("", ".", "..") or str(out).strip() == "":
        raise ConfigError(
            f"--out {str(out)!r}: give a folder to create, e.g. --out results/run1 "
            "(not the current folder or a parent)"
        )
    resolved = out.resolve()
    here = Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise ConfigError(
            f"--out {out}: is the current folder or one of its parents; give a "
            "folder to create, e.g. --out results/run1"
        )
    if resolved.parent == resolved:
        raise ConfigError(f"--out {out}: is a file system root; give a folder")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ConfigError(
                f"output folder {out} exists (from an earlier run?); add --force to "
                "replace it with this run's results, or give --out another folder"
            )
        if not written_by_lagrax(out):
            raise ConfigError(
                f"output folder {out} exists and was not written by lagrax (it has "
                f"no lagrax {MARKER}); --force replaces only lagrax's own results. "
                "Move it away yourself, or give --out another folder"
            )
    parent = out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"--out {out}: cannot create {parent} ({e.strerror})"
        ) from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"--out {out}: folder {parent} is not writable")
    return out


def written_by_lagrax(folder: Path) -> bool:
    """Whether `folder` holds the summary.json of a lagrax run."""
    try:
        summary = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(summary, dict) and "lagrax" in summary.get("versions", {})


@contextlib.contextmanager
def locked(out: Path):
    """Hold the lock of output folder `out` for the duration; ConfigError if
    another run holds it."""
    path = out.parent / f".{out.name}.lock"
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ConfigError(
                    f"--out {out}: cannot lock it ({e.strerror})"
                ) from None
            raise ConfigError(
                f"output folder {out} is being written by another lagrax run (lock "
                f"{path}); wait for it to finish, or give --out another folder"
            ) from None
        # The holder before us may have removed the file after we opened it:
        # then our lock is on a file nobody else sees. Try again.
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def probe_rename(out: Path) -> None:
    """Refuse, before the run, an existing output folder that cannot be moved
    aside (a mount point, a sticky folder owned by someone else)."""
    if not out.exists():
        return
    aside = out.with_name(f".{out.name}.probe-{os.getpid()}")
    try:
        out.rename(aside)
    except OSError as e:
        raise ConfigError(
            f"--out {out}: cannot replace it, as it cannot be renamed ({e.strerror})"
        ) from None
    aside.rename(out)


def make_temporary(out: Path) -> Path:
    """A fresh folder beside `out` to write the results into."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; the result is not
    return tmp


class Interrupts:
    """Ctrl-C, noted and acted on at the run's safe points (`check()`).

    The handler never raises: Python's own KeyboardInterrupt, raised wherever
    Python code runs, is swallowed inside garbage-collection callbacks (and the
    run goes on) and aborts the interpreter inside an extension module's
    initialization. The command calls `check()` between chunks of the
    integration and between the files it writes, so it stops within a chunk or a
    compile.
    """

    def __init__(self, pressed: list | None = None):
        self.pressed = [] if pressed is None else pressed

    @property
    def pending(self) -> bool:
        return bool(self.pressed)

    def handle(self, signum, frame):
        del signum, frame
        if not self.pressed:
            print("lagrax: stopping...", file=sys.stderr, flush=True)
        self.pressed.append(True)

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed."""
        if self.pending:
            raise KeyboardInterrupt


@contextlib.contextmanager
def interrupts(pressed: list | None = None):
    """Install `Interrupts` as the SIGINT handler for the duration (main thread
    only; elsewhere Python's own handling stays). `pressed`: a list that an
    earlier handler appended to for each Ctrl-C, to carry on with."""
    state = Interrupts(pressed)
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    before = signal.signal(signal.SIGINT, state.handle)
    try:
        yield state
    finally:
        signal.signal(signal.SIGINT, before)


def commit(tmp: Path, out: Path, force: bool, state: Interrupts) -> None:
    """Move the finished `tmp` into place as `out`; an old `out` is removed only
    after. A Ctrl-C noted during the moves undoes them."""
    state.check()
    if out.is_dir() and any(out.iterdir()) and not force:
        # Something wrote there during the run, outside lagrax's lock.
        raise ConfigError(
            f"output folder {out} appeared during the run; nothing was replaced. "
            "Add --force, or give --out another folder"
        )
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
    tmp.rename(out)
    if state.pending:
        out.rename(tmp)
        if old is not None:
            old.rename(out)
        raise KeyboardInterrupt
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def remove(tmp: Path) -> None:
    """Remove a temporary folder."""
    if tmp.exists():
        shutil.rmtree(tmp, ignore_errors=True)
