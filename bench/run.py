"""Run named benchmarks in one device call, each under its own time cap, and keep what they print.

A device call lasts at most 600 s and returns at most 8 files, two folders deep. So this runner
gives every benchmark a cap (its registry default, or ``NAME:CAP_S``), stops them all by a global
deadline (default 560 s after the runner starts, the wheel install included), and writes each
one's results as ``<benchmark>/<date>/`` (the layout of ``bench/results/``) into a staging folder:

- ``command.txt``: the exact command, its working folder, the variables set, the cap;
  after it, under ``# environment``, ``nvidia-smi -L``, the versions of triton/torch/jax/cupy,
  nproc, the date and the commit (one file less per run: bench/results is capped in files);
- ``raw_output.txt``: stdout and stderr together, written to the file (never through a pipe,
  which a killed step would take its output with);
- whatever the script writes into ``{out}`` (its own folder; ``$OUT`` is set to it as well).

After every benchmark the whole staging folder is packed into ``OUT/results.tgz``, so a call cut
short keeps what finished; unpack it with ``tar -xzf results.tgz -C bench/results``. A short
table comes last (name, rc, seconds). When ``.whl/`` holds wheels they are installed into
``/tmp/site`` first, as the device notes describe, and put on every benchmark's path.

Examples
--------
    python3 bench/run.py --list
    python3 bench/run.py gemm_vs_cublas attention_vs_sdpa:280 --out $OUT
    python3 bench/run.py gemm_vs_cublas:120 --args 'gemm_vs_cublas=8192 --one-shot' --out $OUT
    python3 bench/run.py sweep_vs_autotune fault_injection --dry-run --out /tmp/plan   # CPU
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRACE_S = 5  # SIGTERM first, SIGKILL this much later (as ``timeout -k 5``)
TIMED_OUT = 124  # the exit status ``timeout`` gives a command stopped at its cap
ENVIRONMENT = "# environment"  # command.txt's second part: the machine (:func:`environment`)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # however this file is loaded
from bench_registry import REGISTRY, Bench  # noqa: E402


@dataclass
class Outcome:
    """What one requested benchmark came to; ``rc`` is None when it did not run."""

    name: str
    rc: int | None
    seconds: float
    cap_s: float
    folder: Path | None
    note: str = ""


def parse_request(text: str, registry: dict[str, Bench]) -> tuple[str, float]:
    """``NAME`` or ``NAME:CAP_S`` -> (name, cap); a bad one raises ValueError with the fix."""
    name, _, cap = text.partition(":")
    if name not in registry:
        raise ValueError(f"[bench] unknown benchmark {name!r}. Known: {', '.join(registry)} "
                         "(python3 bench/run.py --list)")
    if not cap:
        return name, float(registry[name].cap_s)
    try:
        seconds = float(cap)
    except ValueError:
        seconds = -1.0
    if seconds <= 0:
        raise ValueError(f"[bench] {text!r}: the cap after ':' must be a number of seconds > 0, "
                         f"e.g. {name}:120")
    return name, seconds


def child_env(site: Path | None) -> dict[str, str]:
    """The benchmarks' environment: the checkout (and the installed wheels) on the path,
    unbuffered output so a killed step still has its last lines in the log."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    paths = ([str(site)] if site else []) + [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [os.environ.get("PYTHONPATH")] if p])
    if site:
        env["PATH"] = os.pathsep.join([str(site / "bin"), os.environ.get("PATH", "")])
    return env


def install_wheels(wheels: list[Path], site: Path) -> str | None:
    """pip-install the wheelhouse into ``site`` (no index, no dependencies); None or the error.

    Byte-compiled as a user's ``pip install`` does: without it every benchmark's first import
    of a package compiles its sources, and fla's took most of a fresh process's 13-18 s parse
    of its matmul cell (bench/results/first_minute/2026-12-03-2111)."""
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
           "--no-cache-dir", "--upgrade", "--target", str(site), *map(str, wheels)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return None if p.returncode == 0 else (p.stdout + p.stderr).strip()[-2000:]


VERSIONS = """import importlib.metadata as m
have = {(d.metadata["Name"] or "").lower(): d.version for d in m.distributions()}
for want in ("triton", "torch", "jax", "jaxlib", "cupy"):
    hits = sorted(k for k in have if k == want or k.startswith(want + "-cuda"))
    print(want + ":", ", ".join(k + " " + have[k] for k in hits) or "not installed")
"""


def environment(env: dict[str, str]) -> str:
    """The machine as the benchmarks see it (command.txt's ``# environment`` part)."""
    def out(cmd: list[str]) -> str:
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
            return (p.stdout + p.stderr).strip() or f"(no output, rc {p.returncode})"
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{cmd[0]}: {type(exc).__name__}: {exc}"
    return "\n".join([
        "date: " + time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "nvidia-smi -L:", out(["nvidia-smi", "-L"]),
        f"nproc: {os.cpu_count()}",
        "python: " + sys.version.split()[0] + f" ({sys.executable})",
        out([sys.executable, "-c", VERSIONS]),
        # the device tool copies the working tree with a .git that may be stale: the caller
        # names the commit it sent in KTUNE_COMMIT, and git's own answer is kept beside it
        "commit: " + os.environ.get("KTUNE_COMMIT", "(KTUNE_COMMIT not set)")
        + " (git here: " + out(["git", "rev-parse", "HEAD"]).splitlines()[0] + ")",
        "PYTHONPATH: " + env.get("PYTHONPATH", ""),
    ]) + "\n"


def run_capped(argv: list[str], cap_s: float, log: Path, env: dict[str, str]) -> int:
    """Run ``argv`` from the repository root with its output in ``log``; past ``cap_s`` its whole
    process group gets SIGTERM, then SIGKILL, and the result is TIMED_OUT."""
    with open(log, "wb") as f:
        p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
                             process_group=0)
        try:
            return p.wait(timeout=cap_s)
        except subprocess.TimeoutExpired:
            for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, None)):
                try:
                    os.killpg(p.pid, sig)
                    p.wait(timeout=wait_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
                except ProcessLookupError:
                    break
            p.wait()
    with open(log, "a") as f:
        f.write(f"\n[bench] stopped at its cap of {cap_s:.0f} s\n")
    return TIMED_OUT


def result_folder(stage: Path, name: str, stamp: str) -> Path:
    """``stage/name/stamp``, or ``stamp-2``, ``-3``... when that run exists already."""
    folder, n = stage / name / stamp, 1
    while folder.exists():
        n += 1
        folder = stage / name / f"{stamp}-{n}"
    folder.mkdir(parents=True)
    return folder


def pack(stage: Path, tgz: Path) -> None:
    """Everything staged so far into ``tgz`` (written aside, then moved over the old one)."""
    tmp = tgz.with_name(tgz.name + ".part")
    with tarfile.open(tmp, "w:gz") as tar:
        for child in sorted(stage.iterdir()):
            tar.add(child, arcname=child.name)
    tmp.replace(tgz)


def table(outcomes: list[Outcome]) -> str:
    """The short table printed last: name, rc, seconds, cap, folder or note."""
    lines = [f"{'benchmark':26} {'rc':>7} {'seconds':>8} {'cap s':>6}  folder"]
    for o in outcomes:
        rc = "-" if o.rc is None else str(o.rc)
        where = o.note or (f"{o.folder.parent.name}/{o.folder.name}" if o.folder else "")
        lines.append(f"{o.name:26} {rc:>7} {o.seconds:8.1f} {o.cap_s:6.0f}  {where}")
    return "\n".join(lines)


def tail(path: Path, n: int = 14) -> str:
    """The last ``n`` lines of a log."""
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def options(argv: list[str] | None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("requests", nargs="*", metavar="NAME[:CAP_S]", help="benchmarks to run")
    ap.add_argument("--out", type=Path, help="where results.tgz and run.log go (the device $OUT)")
    ap.add_argument("--list", action="store_true", help="print the registry and exit")
    ap.add_argument("--dry-run", action="store_true",
                    help="write the layout (command.txt, raw_output.txt) and pack it; run nothing")
    ap.add_argument("--deadline", type=float, default=560.0,
                    help="seconds after the start by which every benchmark has ended")
    ap.add_argument("--min-left", type=float, default=15.0,
                    help="skip a benchmark when fewer seconds than this are left")
    ap.add_argument("--args", action="append", default=[], metavar="NAME=ARGS",
                    help="arguments for NAME instead of its registry default ({out}: its folder)")
    ap.add_argument("--stage", type=Path, help="staging folder (default: a fresh temporary one)")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="wheelhouse to install")
    ap.add_argument("--site", type=Path, default=Path("/tmp/site"), help="where wheels go")
    ap.add_argument("--stamp", help="the <date> folder name (default: now, UTC, YYYY-MM-DD-HHMM)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None, registry: dict[str, Bench] | None = None) -> int:
    """Run the requested benchmarks; 0 when every one ran and exited 0."""
    registry = REGISTRY if registry is None else registry
    opts = options(argv)
    opts.command = sys.argv[1:] if argv is None else argv
    if opts.list:
        for name, b in registry.items():
            print(f"{name:26} {b.cap_s:5.0f} s  {b.question}\n{'':34}bench/{b.script} {b.args}")
        return 0
    try:
        if not opts.requests or opts.out is None:
            raise ValueError("[bench] name at least one benchmark and --out DIR, e.g. "
                             "python3 bench/run.py gemm_vs_cublas --out $OUT (--list shows names)")
        requests = [parse_request(r, registry) for r in opts.requests]
        overrides = dict(a.split("=", 1) for a in opts.args if "=" in a)
        bad = [a for a in opts.args if "=" not in a] + [n for n in overrides
                                                         if n not in dict(requests)]
        if bad:
            raise ValueError(f"[bench] --args {bad[0]!r}: write NAME=ARGS for a benchmark named "
                             "on this command line, e.g. --args 'gemm_vs_cublas=8192 --one-shot'")
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    return run_all(opts, registry, requests, overrides)


def run_all(opts: argparse.Namespace, registry: dict[str, Bench],
            requests: list[tuple[str, float]], overrides: dict[str, str]) -> int:
    """The loop: caps clipped to the deadline, layout written, packed after every benchmark."""
    t0 = time.monotonic()
    opts.out.mkdir(parents=True, exist_ok=True)
    stage = opts.stage or Path(tempfile.mkdtemp(prefix="ktune-bench-"))
    stage.mkdir(parents=True, exist_ok=True)
    wheels = sorted(opts.wheels.glob("*.whl")) if opts.wheels.is_dir() else []
    if wheels and opts.dry_run:
        print(f"dry run: would install {len(wheels)} wheels from {opts.wheels} into {opts.site}")
    elif wheels:
        error = install_wheels(wheels, opts.site)
        if error:
            print(f"[bench] installing {len(wheels)} wheels from {opts.wheels} failed:\n{error}",
                  file=sys.stderr)
            return 1
        print(f"installed {len(wheels)} wheels into {opts.site} in {time.monotonic() - t0:.0f} s")
    env = child_env(opts.site if wheels else None)
    env_text = environment(env)
    print(env_text, flush=True)
    stamp = opts.stamp or time.strftime("%Y-%m-%d-%H%M", time.gmtime())
    runner = shlex.join([sys.executable, "bench/run.py", *opts.command])
    outcomes: list[Outcome] = []
    for name, cap in requests:
        left = opts.deadline - (time.monotonic() - t0)
        if left < opts.min_left:
            outcomes.append(Outcome(name, None, 0.0, cap, None, f"skipped, {left:.0f} s left"))
            print(f"== {name}: skipped, {left:.0f} s left", flush=True)
            continue
        cap_used = min(cap, left)
        bench = registry[name]
        folder = result_folder(stage, name, stamp)
        args = overrides.get(name, bench.args).replace("{out}", str(folder))
        argv = [sys.executable, str(ROOT / "bench" / bench.script), *shlex.split(args)]
        env["OUT"] = str(folder)
        (folder / "command.txt").write_text(
            f"cd {ROOT}\nOUT={folder} PYTHONPATH={env['PYTHONPATH']} {shlex.join(argv)}\n"
            f"# cap {cap_used:.0f} s (asked {cap:.0f} s, {left:.0f} s left before the deadline); "
            f"{{out}} and $OUT are this folder\n# runner: {runner}\n"
            f"{ENVIRONMENT}\n{env_text}\n")
        t = time.monotonic()
        if opts.dry_run:
            (folder / "raw_output.txt").write_text("dry run: not executed\n")
            rc = None
        else:
            rc = run_capped(argv, cap_used, folder / "raw_output.txt", env)
        outcomes.append(Outcome(name, rc, time.monotonic() - t, cap_used, folder))
        print(f"== {name}: rc={'-' if rc is None else rc} {time.monotonic() - t:.0f} s "
              f"(cap {cap_used:.0f} s, {time.monotonic() - t0:.0f} s in all)", flush=True)
        pack(stage, opts.out / "results.tgz")
    for o in outcomes:
        if o.folder:
            print(f"---- {o.name} ({o.folder})\n{tail(o.folder / 'raw_output.txt')}")
    summary = table(outcomes)
    (opts.out / "run.log").write_text(f"stage: {stage}\n{summary}\n")
    print(f"\nstaged in {stage}; packed into {opts.out / 'results.tgz'} "
          "(tar -xzf results.tgz -C bench/results)\n" + summary)
    ran = [o.rc == 0 or (opts.dry_run and o.folder is not None) for o in outcomes]
    return 0 if all(ran) else 1


if __name__ == "__main__":
    sys.exit(main())
