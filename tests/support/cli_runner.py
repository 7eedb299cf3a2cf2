"""Run many ``tritonwatch`` command lines fast and safely: one Python process imports the CLI once,
then forks a child per case (own session, own stderr file, a deadline, killed with its group when late).

Usage (the tests drive it): ``python cli_runner.py < cases.json > results.json`` where each case is
``{"argv": [...], "env": {...}}`` and each result ``{"rc": int | null, "stderr": str}`` (null: it did not
end within the deadline, i.e. it accepted the input and went to work).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import traceback

DEADLINE = float(os.environ.get("CLI_RUNNER_DEADLINE", "20"))
PARALLEL = 4


def _child(argv: list[str], env: dict[str, str], err_path: str) -> None:
    os.setsid()
    fd = os.open(err_path, os.O_WRONLY | os.O_TRUNC)
    os.dup2(fd, 2)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.environ.update(env)
    rc = 1
    try:
        from tritonwatch.cli import main

        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()  # what the console script would show the user
        rc = 1
    finally:
        sys.stderr.flush()
        os._exit(rc)


def run_all(cases: list[dict]) -> list[dict]:
    import tritonwatch.cli

    tritonwatch.cli.build_parser()  # import every command module once, before forking
    results: list[dict | None] = [None] * len(cases)
    running: dict[int, tuple[int, str, float]] = {}  # pid -> (case index, stderr file, deadline)
    todo = list(range(len(cases)))
    while todo or running:
        while todo and len(running) < PARALLEL:
            i = todo.pop(0)
            fd, path = tempfile.mkstemp(prefix="cli-case-")
            os.close(fd)
            pid = os.fork()
            if pid == 0:
                _child(cases[i]["argv"], cases[i].get("env", {}), path)
            running[pid] = (i, path, time.monotonic() + DEADLINE)
        for pid, (i, path, deadline) in list(running.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            rc: int | None
            if done:
                rc = os.waitstatus_to_exitcode(status)
            elif time.monotonic() > deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                os.waitpid(pid, 0)
                rc = None
            else:
                continue
            with open(path, errors="replace") as f:
                results[i] = {"rc": rc, "stderr": f.read()}
            os.unlink(path)
            del running[pid]
        time.sleep(0.01)
    return [r or {"rc": None, "stderr": ""} for r in results]


if __name__ == "__main__":
    json.dump(run_all(json.load(sys.stdin)), sys.stdout)
