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


def write_output(path, data: bytes) -> Path:
    path = Path(path)
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
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            fd = os.open(real, os.O_WRONLY | os.O_NOCTTY)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            return path
        tmp = real.with_name(f"{real.name}.tmp.{os.getpid()}")
        tmp.unlink(missing_ok=True)  # left by a killed process that had our pid
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
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
