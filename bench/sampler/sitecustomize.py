"""Every thread of every Python process, sampled: where a first minute's time goes (bench only).

Put this folder first on ``PYTHONPATH`` and set ``KTUNE_BENCH_SAMPLE=DIR``: each Python process
that starts then (the notebook, the device worker, the input helper, the compile pool and its
fork server) runs a thread that records, every :data:`PERIOD_S`, one label per thread of that
process (``sys._current_frames``) and appends them to ``DIR/<pid>.jsonl``. A label names the
innermost frame of jupyter_ktune (module:function:line), the package of the innermost frame,
and the outermost module being imported, if any. The sampler itself needs the GIL: a gap in a
process's samples is a stretch in which some thread held the GIL in C (an import's module
body in C, a compile's C++ passes). ``bench/thread_timeline.py`` reads the folder.

Measurement only: the sampled process runs slower (a sample costs the GIL every 3 ms), so its
figures locate time, and the interleaved A/B rows measure it. A ``sitecustomize`` of the
interpreter's own is shadowed while this folder is first on the path.
"""

import os

PERIOD_S = 0.003
FLUSH_S = 0.3
#: the packages a label names (the innermost frame's, else its file's name)
PACKAGES = ("jupyter_ktune", "triton", "torch", "cupy", "cupyx", "numpy", "bokeh", "ipywidgets",
            "fla", "IPython", "ipykernel", "zmq", "jax", "jaxlib", "concurrent",
            "multiprocessing", "subprocess", "threading", "selectors", "socket", "importlib")


def _package(filename):
    parts = filename.replace("\\", "/").split("/")
    for p in reversed(parts[:-1]):
        if p in PACKAGES:
            return p
    stem = parts[-1][:-3] if parts[-1].endswith(".py") else parts[-1]
    return stem


def label(frame):
    """``ktune_module:function:line | package[:function] [| import MODULE]`` of one stack."""
    ours = inner = importing = None
    while frame is not None:
        code = frame.f_code
        if inner is None:
            inner = f"{_package(code.co_filename)}:{code.co_name}"
        if ours is None and "jupyter_ktune/" in code.co_filename.replace("\\", "/"):
            module = code.co_filename.replace("\\", "/").split("jupyter_ktune/")[-1][:-3]
            ours = f"{module}:{code.co_name}:{frame.f_lineno}"
        if code.co_name == "_find_and_load" and "importlib" in code.co_filename:
            importing = frame.f_locals.get("name")  # outermost wins: walked inside out
        frame = frame.f_back
    return f"{ours or '-'} | {inner}" + (f" | import {importing}" if importing else "")


def _start(folder):
    import atexit
    import json
    import sys
    import threading
    import time

    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{os.getpid()}.jsonl")
    lines = [json.dumps({"pid": os.getpid(), "ppid": os.getppid(),
                         "argv": " ".join(sys.argv)[:160]})]
    lock = threading.Lock()

    def flush():
        with lock:
            if lines:
                with open(path, "a", encoding="utf-8") as fh:
                    fh.write("\n".join(lines) + "\n")
                lines.clear()

    def sample():
        me, last = threading.get_ident(), time.time()
        while True:
            time.sleep(PERIOD_S)
            now = time.time()
            names = {t.ident: t.name for t in threading.enumerate()}
            row = {names.get(i, str(i)): label(f) for i, f in sys._current_frames().items()
                   if i != me}
            with lock:
                lines.append(json.dumps([round(now, 4), row]))
            if now - last > FLUSH_S:
                flush()
                last = now

    atexit.register(flush)
    threading.Thread(target=sample, name="bench-sampler", daemon=True).start()


if os.environ.get("KTUNE_BENCH_SAMPLE"):
    _start(os.environ["KTUNE_BENCH_SAMPLE"])
