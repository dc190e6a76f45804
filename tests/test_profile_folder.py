"""A profile's temporary folder is removed, even when the profile fails (issue 34, item 3).

Every ncu line view and Proton trace left a ``ktune-ncu-*`` / ``ktune-proton-*`` folder in the
temp directory, a trace tens of MB. Now the folder goes when the profile is done, and one left by
a worker killed mid-profile (its timeout is SIGKILL) goes with the next profile of that kind.
"""

from __future__ import annotations

import subprocess
import tempfile

import pytest
from test_worker import GOOD, LINE, inputs, reference

from jupyter_ktune.api import parse_cell
from jupyter_ktune.measure import profile_ncu
from jupyter_ktune.measure.profile_folder import profile_folder
from jupyter_ktune.runner import profile


@pytest.fixture
def temp_dir(tmp_path, monkeypatch):
    """The temp directory of this test alone (others on the host profile too)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _ncu_fails(kernel, argv, args, folder, timeout):
    (folder / "report.ncu-rep").write_bytes(b"\0" * 1000)  # what ncu wrote before failing
    raise RuntimeError("[ktune] ncu wrote no report (exit 9)")


def test_a_failed_ncu_profile_leaves_no_folder(temp_dir, monkeypatch):
    monkeypatch.setattr(profile_ncu, "ncu_status", lambda: None)  # as if ncu were installed
    monkeypatch.setattr(profile_ncu, "run_under_ncu", _ncu_fails)
    spec = parse_cell(LINE, GOOD, {"inputs": inputs, "reference": reference})
    for run in (profile.profile_lines, profile.ncu_metrics):
        with pytest.raises(RuntimeError, match="ncu wrote no report"):
            run(spec, spec.space.default())
    assert list(temp_dir.iterdir()) == []


def test_the_folder_of_a_dead_process_goes_with_the_next_profile(temp_dir):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = temp_dir / f"ktune-proton-{dead.pid}-abc123"
    (stale / "sub").mkdir(parents=True)
    with profile_folder("proton") as live_elsewhere:  # a folder of a live process stays
        with profile_folder("proton") as mine:
            assert mine.is_dir() and live_elsewhere.is_dir()
            assert not stale.exists()
        assert not mine.exists() and live_elsewhere.exists()
    assert list(temp_dir.iterdir()) == []
