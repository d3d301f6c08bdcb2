"""Whether an output path may be written: the one rule for everything a
run or tool writes (a work dir, ``--out``, ``--out-dir``, an export, a
converted checkpoint)."""

import errno
import os
import os.path as osp
import stat
from collections.abc import Callable
from typing import Optional


def loop_start(path: str) -> str:
    """A looping path cut at the link that closes the loop."""
    parts = path.split(os.sep)
    for index, part in enumerate(parts):
        if part and part in parts[index + 1 :]:
            return os.sep.join(parts[: parts.index(part, index + 1)])
    return path


def _same_file(path: str, other: str) -> bool:
    """Whether two paths are one file or folder (links resolved, hard
    links included)."""
    try:
        return osp.samefile(path, other)
    except OSError:
        return osp.realpath(path) == osp.realpath(osp.expanduser(other))


def output_problem(
    path: str,
    what: str,
    file: bool = False,
    inputs: Optional[dict[str, str]] = None,
    replaces: Optional[tuple[str, Callable[[str], bool]]] = None,
) -> Optional[str]:
    """Why ``path`` may not be written, in one line naming it as ``what``,
    or None: the one rule for everything a run or tool writes (a work dir,
    ``--out``, ``--out-dir``, an export, a converted checkpoint).

    The path (a ``file``, else a folder) must not be one of ``inputs``
    (``{'the checkpoint': PATH}``, links resolved) nor lie in an input
    folder, must not pass through
    a symbolic link loop or a file, and the folder that holds or would
    hold it must be writable; a file must not be a folder, nor read-only.
    ``replaces=(kind, test)``: an existing file may be replaced only if
    ``test(path)`` says it is of that kind (an earlier output)."""
    path = osp.abspath(osp.expanduser(path))
    for name, given in (inputs or {}).items():
        if given and _same_file(path, given):
            return (
                f'{what} {path} is {name}, an input of this command; give '
                'another path.'
            )
        # what is written in an input folder is read by the next run
        real = osp.realpath(osp.expanduser(given or ''))
        if (
            given
            and osp.isdir(real)
            and osp.realpath(path).startswith(real.rstrip(os.sep) + os.sep)
        ):
            return (
                f'{what} {path} lies in {name} {given}, an input of this '
                'command; give a path outside it.'
            )
    # the existing part of the path, from the root: loops and files
    parts = path.split(os.sep)
    folder = os.sep
    for depth in range(1, len(parts) + 1):
        current = os.sep.join(parts[:depth]) or os.sep
        try:
            mode = os.stat(current).st_mode
        except OSError as error:
            if error.errno == errno.ELOOP:
                return (
                    f'{what} {path}: {loop_start(current)} is a symbolic '
                    'link loop (a link to a folder above it); remove or '
                    'replace the link.'
                )
            break  # does not exist (yet)
        if not stat.S_ISDIR(mode):
            if depth < len(parts) or not file:
                return f'{what} {path}: {current} is a file, not a folder.'
            break
        folder = current
    if osp.isdir(path):
        if file:
            return f'{what} {path} is a folder; give a file name.'
    elif file and osp.exists(path):
        if not os.access(path, os.W_OK):
            return f'{what} {path} is read-only; give another path.'
        if replaces is not None and not replaces[1](path):
            return (
                f'{what} {path} exists and is not {replaces[0]}; give a new '
                'name, or --force to replace it.'
            )
    if not os.access(folder, os.W_OK | os.X_OK):
        return (
            f'{what} {path}: {folder} is not writable; choose a folder '
            'you can write to.'
        )
    return None
