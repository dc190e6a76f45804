"""Issue 15 item 9: the compile cache is private to the user and nothing planted in it runs.

Tests run as root, so "another user's folder" is simulated by a different ``os.getuid``.
"""

from __future__ import annotations

import os
import stat

import pytest

from jupyter_ktune.api import parse_cell
from jupyter_ktune.backends import cache_folder as cache
from jupyter_ktune.backends.cache_folder import (
    CacheFolderError,
    cache_dir,
    cached_text,
    entry_path,
)
from jupyter_ktune.backends.pallas.cell import load_cell


@pytest.fixture
def root(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KTUNE_CACHE_DIR", str(folder))
    return folder


def test_the_default_is_the_users_cache_directory_created_private(tmp_path, monkeypatch):
    import platformdirs

    monkeypatch.delenv("KTUNE_CACHE_DIR", raising=False)
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda app, **kw: str(tmp_path / app))
    folder = cache_dir("triton")
    assert folder == tmp_path / "jupyter-ktune" / "triton"
    for f in (folder, folder.parent):
        assert stat.S_IMODE(os.lstat(f).st_mode) == 0o700


def test_a_world_writable_folder_is_refused(root):
    root.mkdir()
    root.chmod(0o777)
    with pytest.raises(CacheFolderError, match=r"writable by others \(mode 0777\).*chmod 700"):
        cache_dir()


def test_a_group_writable_subfolder_is_refused(root):
    (root / "triton").mkdir(parents=True, mode=0o700)
    (root / "triton").chmod(0o770)
    root.chmod(0o700)
    with pytest.raises(CacheFolderError, match="triton is writable by others"):
        cache_dir("triton")


def test_another_users_folder_is_refused(root, monkeypatch):
    root.mkdir(mode=0o700)
    other = os.getuid() + 4242
    monkeypatch.setattr(cache.os, "getuid", lambda: other)
    with pytest.raises(CacheFolderError, match=r"belongs to another user \(uid \d+\)"):
        cache_dir()


def test_a_symlinked_folder_is_refused(root, tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    root.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(CacheFolderError, match="is a symlink"):
        cache_dir()


def test_a_private_folder_of_mine_is_used(root):
    root.mkdir(mode=0o700)
    assert cache_dir() == root


PLANTED = "open({marker!r}, 'w').write('planted code ran')\n"


def test_a_planted_entry_with_the_right_name_is_never_run(root, tmp_path):
    """The Pallas cell module: a file at its name with other content is replaced, not run."""
    src = "def k():\n    return 'the cell'\n"
    spec = parse_cell("k --backend pallas", src)
    marker = tmp_path / "marker"
    header = "# %%kernel k --backend pallas (jupyter-ktune; lines = cell lines)\n"
    text = header + "\n" * max(spec.body_line - 2, 0) + src
    path = entry_path(cache_dir(), "pallas_k", ".py", text)
    path.write_text(PLANTED.format(marker=str(marker)))
    module = load_cell(spec, "interpret")
    assert module.k() == "the cell"
    assert not marker.exists()
    assert path.read_text() == text  # recompiled in place


def test_a_symlink_in_place_of_an_entry_is_not_followed(root, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's file")
    folder = cache_dir()
    path = entry_path(folder, "scale", ".cu", "__global__ void scale() {}\n")
    path.symlink_to(victim)
    got, text = cached_text(folder, "scale", ".cu", "__global__ void scale() {}\n")
    assert got == path and text == "__global__ void scale() {}\n"
    assert victim.read_text() == "the victim's file"  # not written through the link
    assert not path.is_symlink() and path.read_text() == text
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600


def test_a_symlink_to_a_file_with_the_right_content_is_not_used(root, tmp_path):
    text = "print('hi')\n"
    outside = tmp_path / "outside.py"
    outside.write_text(text)  # right bytes, but not ours to trust
    folder = cache_dir()
    path = entry_path(folder, "m", ".py", text)
    path.symlink_to(outside)
    cached_text(folder, "m", ".py", text)
    assert not path.is_symlink()


def test_an_intact_entry_is_reused_without_a_rewrite(root):
    folder = cache_dir()
    path, _ = cached_text(folder, "m", ".py", "x = 1\n")
    inode = os.lstat(path).st_ino
    cached_text(folder, "m", ".py", "x = 1\n")
    assert os.lstat(path).st_ino == inode
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


TRITON_PROBE = """
import sys
from jupyter_ktune.backends.cache_folder import cache_dir, entry_path
from jupyter_ktune.backends.triton.module import PRELUDE, load_module
src = "def cell():\\n    return 'the cell'\\n"
path = entry_path(cache_dir("triton"), "ktune_triton_cell", ".py", PRELUDE + src + "\\n")
path.write_text(sys.argv[1])
print(load_module(src, "cell").cell())
print(path.read_text() == PRELUDE + src + "\\n")
"""


def test_a_planted_triton_module_is_not_imported(root, tmp_path):
    """What issue 15 saw: a module planted under the cell's name ran in the worker. In a fresh
    interpreter (the Triton module imports triton, which picks its mode at import)."""
    import subprocess
    import sys

    marker = tmp_path / "marker"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", TRITON_PROBE, PLANTED.format(marker=str(marker))],
                         capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    assert out.split() == ["the", "cell", "True"]
    assert not marker.exists()
