"""Writing the report's files by the harness's rules (Note [Output files], harness/output_file.h):
a regular file or a new path is replaced atomically (a temporary beside it, fsync, rename) and
keeps its permission bits; a symlink is followed to its target and stays a link; a device or FIFO
is written in place, never replaced; a directory or socket is an OutputError naming the path."""
from __future__ import annotations

import os
import stat
from pathlib import Path


class OutputError(Exception):
    """A report file that cannot be written; the message names the file and the reason."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _target(path: Path):
    """(the file written, its name in messages, its stat or None where it does not exist)."""
    real = Path(os.path.realpath(path))  # a dangling link resolves to the file it would create
    shown = str(path) if real == path.absolute() else f"{path} (-> {real})"
    try:
        st = os.stat(real)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"{shown}: {e.strerror}")
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{shown}: is a directory")
    if st is not None and stat.S_ISSOCK(st.st_mode):
        raise OutputError(f"{shown}: is a socket")
    return real, shown, st


def _create_beside(real: Path, shown: str):
    """(fd, path) of a new temporary file beside `real`; an OutputError naming the folder where one
    cannot be made (a missing folder, no write permission, a file system such as /proc that holds
    no new files: open(2)'s ENOENT there is about the temporary, not the target)."""
    tmp = real.with_name(f"{real.name}.tmp.{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)  # left by a killed process that had our pid
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666), tmp
    except OSError as e:
        where = real.parent
        why = "no such folder" if not where.is_dir() else (e.strerror or str(e))
        raise OutputError(f"{shown}: cannot write: cannot create a file in {where}: {why}")


def check_output(path) -> None:
    """Raises the OutputError write_output would, before the work that makes the data: a
    directory or socket, or a regular (or new) file whose folder takes no new file (probed by
    creating and removing the temporary write_output writes first)."""
    path = Path(path)
    real, shown, st = _target(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        if not os.access(real, os.W_OK):
            raise OutputError(f"{shown}: cannot write: permission denied")
        return
    fd, tmp = _create_beside(real, shown)
    os.close(fd)
    tmp.unlink(missing_ok=True)


def write_output(path, data: bytes) -> Path:
    path = Path(path)
    real, shown, st = _target(path)
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            fd = os.open(real, os.O_WRONLY | os.O_NOCTTY)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            return path
        fd, tmp = _create_beside(real, shown)
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
            _write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        try:
            os.replace(tmp, real)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as e:
        raise OutputError(f"{shown}: cannot write: {e.strerror or e}")
    return path
