"""The private folder where backends keep the files made from cells (Triton/Pallas modules, CUDA
sources for nvcc), and the only way they write and read it.

Issue 15 item 9: the folder used to be a fixed ``$TMPDIR/ktune`` whose ``.py`` files were
imported as found. Another local user who created that folder first could run code as the
victim (a planted module ran and the cell still said "correct") or make the victim write
through a symlink. Now:

* the folder is the user's cache directory (``platformdirs.user_cache_dir("jupyter-ktune")``,
  ``~/.cache/jupyter-ktune`` on Linux) or ``$KTUNE_CACHE_DIR``, created with mode 0700; one that
  is a symlink, is not a directory, belongs to another user, or is writable by the group or
  others is refused with a :class:`CacheFolderError` that says how to fix it;
* an entry is named by the SHA-256 of its content and is used only when it is a regular file
  (never a link: opened with ``O_NOFOLLOW``) of this user holding exactly the content the
  caller expects (so its bytes hash to its name); anything else is replaced;
* an entry is written to a new file in the same folder (``O_CREAT | O_EXCL | O_NOFOLLOW``, mode
  0600) and renamed over its name (``os.replace`` replaces a link, it never writes through it),
  so a reader never sees half a file;
* callers execute the text they checked (:func:`cached_text` returns it), not whatever the file
  holds a moment later.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from pathlib import Path

from jupyter_ktune.errors import CannotRun

APP = "jupyter-ktune"
DIGEST_CHARS = 32  # of the SHA-256 hex digest in an entry's name


class CacheFolderError(CannotRun):
    """The cache folder is not private to this user; nothing is written to or read from it (the
    variant is "cannot run", with this message)."""


def cache_root() -> Path:
    """``$KTUNE_CACHE_DIR``, else the user's cache directory for jupyter-ktune (not created)."""
    env = os.environ.get("KTUNE_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP, appauthor=False))


def cache_dir(sub: str = "") -> Path:
    """The checked private folder (``sub`` inside the root, when given), created mode 0700.

    Raises
    ------
    CacheFolderError
        When the root or ``sub`` is a link, not a directory, another user's, or writable by
        the group or others.
    """
    root = cache_root()
    folders = [root, root / sub] if sub else [root]
    for folder in folders:
        try:
            folder.mkdir(mode=0o700, parents=folder is root, exist_ok=True)
        except FileExistsError:  # a file or a dangling link in its place: checked below
            pass
        _check_private(folder)
    return folders[-1]


def _check_private(folder: Path) -> None:
    fix = (f"Remove it or make it yours with mode 0700 (chmod 700 {folder}), or set "
           "KTUNE_CACHE_DIR to a private folder.")
    st = os.lstat(folder)
    if stat.S_ISLNK(st.st_mode):
        raise CacheFolderError(f"[ktune] the cache folder {folder} is a symlink; it is not "
                               f"used. {fix}")
    if not stat.S_ISDIR(st.st_mode):
        raise CacheFolderError(f"[ktune] the cache folder {folder} is not a directory. {fix}")
    if st.st_uid != os.getuid():
        raise CacheFolderError(f"[ktune] the cache folder {folder} belongs to another user (uid "
                               f"{st.st_uid}); its files could run as you. {fix}")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheFolderError(f"[ktune] the cache folder {folder} is writable by others (mode "
                               f"{stat.S_IMODE(st.st_mode):04o}); its files could run as you. "
                               f"{fix}")


def digest(text: str) -> str:
    """The content hash that names an entry holding ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def entry_path(folder: Path, stem: str, suffix: str, text: str) -> Path:
    """Where the entry holding ``text`` lives: ``{stem}_{digest}{suffix}``."""
    return folder / f"{stem}_{digest(text)}{suffix}"


def cached_text(folder: Path, stem: str, suffix: str, text: str) -> tuple[Path, str]:
    """``(path, text)``: an entry that holds exactly ``text``, reused when it checks out.

    The name carries the hash of ``text``; the check compares the whole content, which is
    stronger than re-hashing it. An entry that is a link, not a regular file, not this user's,
    or holds anything else (planted, or cut short) is replaced by a fresh one.
    """
    path = entry_path(folder, stem, suffix, text)
    if _read_checked(path) != text:
        _write_atomically(path, text)
    return path, text


def _read_checked(path: Path) -> str | None:
    """The entry's text when it is this user's regular file (not a link), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # missing, or a link (ELOOP)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read()
    finally:
        os.close(fd)
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode())
        os.replace(tmp, path)  # renames over a link or a planted file; never writes through
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
