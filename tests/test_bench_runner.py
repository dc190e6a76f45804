"""bench/run.py on a CPU: caps, the global deadline, the results layout and the packed tarball,
with tiny fake benchmarks (scripts written here) in place of the GPU ones."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_run", ROOT / "bench" / "run.py")
run = sys.modules.setdefault("bench_run", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(run)  # in sys.modules first: its dataclasses look their module up
STAMP = "2026-01-02-0304"


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    """A registry of three fake benchmarks: one that writes a JSON into its folder, one that
    would sleep a minute, one that fails. Output buffering is left to the runner to turn off."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    (tmp_path / "ok.py").write_text(
        "import sys, pathlib\nprint('hello from ok')\n"
        "pathlib.Path(sys.argv[1], 'result.json').write_text('{\"x\": 1}')\n")
    (tmp_path / "slow.py").write_text(
        "import time\nprint('started')  # no flush: PYTHONUNBUFFERED keeps it\n"
        "time.sleep(60)\nprint('never')\n")
    (tmp_path / "fail.py").write_text("import sys\nprint('failing')\nsys.exit(3)\n")
    return {"ok": run.Bench(str(tmp_path / "ok.py"), "{out}", 30, "does ok write?"),
            "slow": run.Bench(str(tmp_path / "slow.py"), "", 60, "does slow stop?"),
            "fail": run.Bench(str(tmp_path / "fail.py"), "", 30, "does fail fail?")}


def _main(tmp_path, registry, *args):
    return run.main([*args, "--out", str(tmp_path / "out"), "--stage", str(tmp_path / "stage"),
                     "--stamp", STAMP, "--wheels", str(tmp_path / "no-wheels")], registry)


def test_each_benchmark_gets_its_cap_its_folder_and_the_tarball(tmp_path, fakes, capsys):
    t = time.monotonic()
    rc = _main(tmp_path, fakes, "ok", "slow:1.5", "fail")
    assert time.monotonic() - t < 20  # slow.py would sleep 60 s: its 1.5 s cap stopped it
    assert rc == 1  # slow timed out and fail exited 3
    folder = tmp_path / "stage" / "ok" / STAMP
    assert sorted(p.name for p in folder.iterdir()) == [
        "command.txt", "raw_output.txt", "result.json"]
    assert "hello from ok" in (folder / "raw_output.txt").read_text()
    command = (folder / "command.txt").read_text()
    assert f"{tmp_path / 'ok.py'} {folder}" in command and "cap 30 s" in command
    env = command.split("# environment\n", 1)[1]
    for key in ("date:", "nvidia-smi -L:", "nproc:", "triton:", "torch:", "jax:", "cupy:"):
        assert key in env, key
    slow = (tmp_path / "stage" / "slow" / STAMP / "raw_output.txt").read_text()
    assert "started" in slow and "never" not in slow and "stopped at its cap of 2 s" in slow
    with tarfile.open(tmp_path / "out" / "results.tgz") as tar:
        names = set(tar.getnames())
    assert {f"ok/{STAMP}/result.json", f"slow/{STAMP}/raw_output.txt",
            f"fail/{STAMP}/command.txt"} <= names
    last = capsys.readouterr().out.strip().splitlines()[-3:]  # the table comes last
    assert [line.split()[:2] for line in last] == [["ok", "0"], ["slow", "124"], ["fail", "3"]]
    assert "slow" in (tmp_path / "out" / "run.log").read_text()


def test_the_deadline_clips_a_cap_and_skips_what_is_left(tmp_path, fakes, capsys):
    t = time.monotonic()
    rc = _main(tmp_path, fakes, "slow", "ok", "--deadline", "6", "--min-left", "1")
    assert time.monotonic() - t < 6 + run.GRACE_S + 3
    assert rc == 1
    command = (tmp_path / "stage" / "slow" / STAMP / "command.txt").read_text()
    cap = float(command.split("# cap ")[1].split(" s")[0])
    assert 1 <= cap <= 6 and "asked 60 s" in command  # the registry's 60 s, clipped
    assert not (tmp_path / "stage" / "ok").exists()
    assert capsys.readouterr().out.strip().splitlines()[-1].split()[:2] == ["ok", "-"]


def test_a_second_run_in_the_same_minute_gets_its_own_folder(tmp_path, fakes):
    assert _main(tmp_path, fakes, "ok") == 0
    assert _main(tmp_path, fakes, "ok") == 0
    assert sorted(p.name for p in (tmp_path / "stage" / "ok").iterdir()) == [STAMP, f"{STAMP}-2"]


def test_bad_requests_are_one_line_with_the_fix(tmp_path, fakes, capsys):
    assert _main(tmp_path, fakes, "nope") == 2
    assert "unknown benchmark 'nope'. Known: ok, slow, fail" in capsys.readouterr().err
    assert _main(tmp_path, fakes, "ok:soon") == 2
    assert "must be a number of seconds > 0, e.g. ok:120" in capsys.readouterr().err
    assert _main(tmp_path, fakes, "ok", "--args", "slow=--x") == 2
    assert "--args 'slow'" in capsys.readouterr().err
    assert run.parse_request("ok:7", fakes) == ("ok", 7.0)
    assert run.parse_request("slow", fakes) == ("slow", 60.0)


def test_a_broken_wheelhouse_stops_before_any_benchmark(tmp_path, fakes, capsys):
    whl = tmp_path / "whl"
    whl.mkdir()
    (whl / "bogus-1.0-py3-none-any.whl").write_text("not a zip")
    rc = run.main(["ok", "--out", str(tmp_path / "out"), "--stage", str(tmp_path / "stage"),
                   "--wheels", str(whl), "--site", str(tmp_path / "site")], fakes)
    assert rc == 1
    assert "installing 1 wheels" in capsys.readouterr().err
    assert not (tmp_path / "stage" / "ok").exists()


def test_every_registered_script_exists_and_the_list_names_it(capsys):
    assert run.main(["--list"]) == 0
    listed = capsys.readouterr().out
    for name, bench in run.REGISTRY.items():
        assert (ROOT / "bench" / bench.script).is_file(), bench.script
        assert name in listed and bench.question in listed


def test_dry_run_of_the_real_registry_writes_the_layout(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "gemm_vs_cublas", "fault_injection:90",
         "--dry-run", "--out", str(tmp_path / "out"), "--stage", str(tmp_path / "stage"),
         "--stamp", STAMP, "--wheels", str(tmp_path / "none")],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "stage" / "gemm_vs_cublas" / STAMP
    assert (f"bench/gemm_vs_cublas.py 8192 --rounds 30 --json {folder}/gemm_interleaved.json"
            in (folder / "command.txt").read_text())
    stage = tmp_path / "stage"
    assert "cap 90 s" in (stage / "fault_injection" / STAMP / "command.txt").read_text()
    with tarfile.open(tmp_path / "out" / "results.tgz") as tar:
        assert f"fault_injection/{STAMP}/command.txt" in tar.getnames()
