"""Run one pipeline (legacy or modern) in a process of its own, for ``compare.run``.

Each side gets a fresh TensorFlow: no profiler state, XLA cluster numbering or thread pools
carried over from the other side. The child is ``python -m compare.pipelines SIDE OUT ...``; its
whole stderr (TensorFlow's log included) goes to the parent's log, and a bad input ends it with
our one-line error and exit code 2, which the parent repeats.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

from common.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, InputError, RunFailed, run_cli, say
from common.run_record import PIPELINES
from common.tflog import quiet_python_logs
from legacy.runner import run_legacy
from modern.runner import run_modern


def run_pipeline(side: str, out: str, images: list[str] | None, steps: int, seed: int,
                 data_service: str | None = None, service_timeout: float | None = None,
                 lost_worker_wait: float | None = None) -> dict:
    """Run ``side`` in this process (what the child does); returns its run.json. Progress
    lines go to stderr, which the parent keeps in its log. ``data_service`` (modern only):
    the tf.data service dispatcher whose workers run modern's input pipeline (and its
    limits, seconds: :func:`modern.runner.run_modern`)."""
    def progress(line: str) -> None:
        say(f"{side}: {line}")

    if side == "legacy":
        return run_legacy(out, images, steps, xla=True, seed=seed, progress=progress)
    return run_modern(out, images, steps, jit=True, seed=seed, progress=progress,
                      data_service=data_service, service_timeout_s=service_timeout,
                      lost_worker_wait_s=lost_worker_wait)


def run_in_child(side: str, out: Path, images: list[str] | None, steps: int, seed: int,
                 log_path: Path | None, data_service: str | None = None,
                 service_timeout: float | None = None, lost_worker_wait: float | None = None,
                 relay: Callable[[str], None] | None = None) -> dict:
    """Run ``side`` in a child Python; stream its stderr to ``log_path`` (or our stderr when
    None). Returns its run.json. Ctrl-C / SIGTERM stop the child cleanly (it keeps its partial
    output) and are re-raised here as KeyboardInterrupt. ``relay(line)`` also hears the
    child's lines about its tf.data service (a worker lost, a wait, elements made again), which
    a user waiting on the run should see while it waits, not only in the log."""
    cmd = [sys.executable, "-m", "compare.pipelines", side, str(out), "--steps", str(steps),
           "--seed", str(seed)]
    if images:
        cmd += ["--images", json.dumps(list(images))]
    if data_service:
        cmd += ["--data_service", data_service]
    for flag, seconds in (("--service_timeout", service_timeout),
                          ("--lost_worker_wait", lost_worker_wait)):
        if seconds is not None:
            cmd += [flag, repr(seconds)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    errors: list[str] = []
    log = open(log_path, "ab") if log_path else None
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)

        def pump() -> None:
            assert proc.stderr is not None  # stderr=PIPE
            for line in proc.stderr:
                if b"error:" in line:
                    errors.append(line.decode("utf-8", "replace").strip())
                if relay and log and _about_the_service(side, line):
                    relay(line.decode("utf-8", "replace").strip())
                if log:
                    log.write(line)
                    log.flush()
                else:
                    os.write(getattr(sys, "_real_stderr_fd", None) or 2, line)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            rc = proc.wait()
        except KeyboardInterrupt:
            _stop(proc)
            raise
        reader.join(timeout=10)
    finally:
        if log:
            log.close()
    if rc in (EXIT_INTERRUPTED, 128 + signal.SIGTERM, -signal.SIGINT, -signal.SIGTERM):
        raise KeyboardInterrupt
    if rc != 0:
        # where the child kept partial results is for compare.run to say: it moves them
        msg = errors[-1].split("error:", 1)[1].split("; partial results kept in ")[0].strip() \
            if errors else \
            f"the {side} pipeline failed (exit code {rc}); see {log_path or 'the log above'}"
        if rc == EXIT_BAD_INPUT:
            raise InputError(msg)
        raise RunFailed(msg)
    return json.loads((out / "run.json").read_text())


def _about_the_service(side: str, line: bytes) -> bool:
    """A progress line of ``side`` (``"modern: ..."``) about its tf.data service."""
    return line.startswith(f"{side}: ".encode()) and b"tf.data service" in line


def _stop(proc: subprocess.Popen) -> None:
    """Ask the child to stop as Ctrl-C would (it cleans up), then insist."""
    for sig, wait in ((signal.SIGINT, 30), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def _child(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m compare.pipelines", description=(
        "Runs one pipeline (legacy or modern) for compare.run, in a process of its own "
        "(compare.run starts it; use python -m legacy.run or modern.run by hand)."))
    p.add_argument("side", choices=PIPELINES)
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--images", default="")
    p.add_argument("--data_service", default=None)
    p.add_argument("--service_timeout", type=float, default=None)
    p.add_argument("--lost_worker_wait", type=float, default=None)
    a = p.parse_args(argv)
    quiet_python_logs()
    run_pipeline(a.side, a.out, json.loads(a.images) if a.images else None, a.steps, a.seed,
                 a.data_service, a.service_timeout, a.lost_worker_wait)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(_child, sys.argv[1:], f"compare.pipelines {' '.join(sys.argv[1:2])}"))
