"""Every code block of README runs as written, each in an empty directory of its own.

- ``python`` blocks run in this process;
- ``sh`` blocks run in bash with ``-e -o pipefail``, this checkout's ``pybroker`` first on
  PATH. The liberties taken, all for a test that shares the machine with others: a
  ``pybroker serve`` line starts the server in the background, waits for it to say what it
  listens on, and the server is stopped by its pid when the block ends; and the fixed ports
  README names (4023, 7000, 5433, 9464, and serve's default 4022 when a line names none) become
  free ones;
- ``text`` blocks are drawings; the opening block (the two commands CI runs) is the one
  block left out.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pybroker.devtools.chaos.ports import free_ports

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
_FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
BLOCKS = [(m.group(1), m.group(2), README.read_text(encoding="utf-8")[:m.start()].count("\n") + 1)
          for m in _FENCE.finditer(README.read_text(encoding="utf-8"))]
OPENING = 0  # the two commands of CI (.ci/run runs them)
PORTS = ("4023", "7000", "5433", "9464")
SERVE_WAIT = 60.0  # seconds a background serve may take to say it listens

# `pybroker` as the blocks see it: serve in the background (its pid kept), all else as is
_SHIM = """\
#!{python}
import os, subprocess, sys, time
args = sys.argv[1:]
if args[:1] != ["serve"]:
    os.execv({python!r}, [{python!r}, "-m", "pybroker", *args])
if "--port" not in args:
    args += ["--port", os.environ["README_SERVE_PORT"]]
directory = os.environ["README_DIR"]
log_path = os.path.join(directory, f"serve-{{len(os.listdir(directory))}}.log")
with open(log_path, "w") as log:
    proc = subprocess.Popen([{python!r}, "-m", "pybroker", *args], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
with open(os.path.join(directory, "serve.pids"), "a") as pids:
    pids.write(f"{{proc.pid}}\\n")
last = "postgresql wire" if "--pg-port" in args else (
    "client token" if "--client-port" in args else (
        "console on" if "--http-port" in args else "clients on"))
deadline = time.monotonic() + {wait}
while time.monotonic() < deadline:
    text = open(log_path).read()
    if last in text:
        sys.stdout.write(text)
        sys.exit(0)
    if proc.poll() is not None:
        sys.stderr.write(text)
        sys.exit(1)
    time.sleep(0.05)  # polling the server's own output for its line
sys.stderr.write("serve did not start: " + open(log_path).read())
sys.exit(1)
"""


def _stop_servers(directory: Path) -> None:
    pids_file = directory / "serve.pids"
    if not pids_file.exists():
        return
    for line in pids_file.read_text().split():
        pid = int(line)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
            except (ProcessLookupError, ChildProcessError):
                break
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _run_sh(block: str, tmp_path: Path) -> subprocess.CompletedProcess:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shim_dir = tmp_path / "shim"
    shim_dir.mkdir()
    shim = shim_dir / "pybroker"
    shim.write_text(_SHIM.format(python=sys.executable, wait=SERVE_WAIT))
    shim.chmod(0o755)
    ports = free_ports(len(PORTS) + 1)
    for fixed, free in zip(PORTS, ports, strict=False):
        block = re.sub(rf"\b{fixed}\b", str(free), block)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "README_DIR": str(tmp_path),
           "README_SERVE_PORT": str(ports[-1]),
           "PATH": os.pathsep.join([str(shim_dir), str(Path(sys.executable).parent),
                                    os.environ.get("PATH", "")])}
    try:
        return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block], cwd=run_dir,
                              env=env, capture_output=True, text=True, timeout=600)
    finally:
        _stop_servers(tmp_path)


@pytest.mark.parametrize("number", [n for n in range(len(BLOCKS)) if n != OPENING],
                         ids=lambda n: f"{BLOCKS[n][0]}-line{BLOCKS[n][2]}")
def test_readme_block_runs_as_written(number, tmp_path, monkeypatch):
    language, code, line = BLOCKS[number]
    if language == "python":
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        monkeypatch.chdir(run_dir)
        exec(compile(code, f"README.md line {line}", "exec"), {"__name__": "readme"})
    elif language == "sh":
        done = _run_sh(code, tmp_path)
        assert done.returncode == 0, (
            f"README.md line {line}: exit {done.returncode}\n--- stdout\n{done.stdout[-3000:]}"
            f"\n--- stderr\n{done.stderr[-3000:]}")
    elif language != "text":  # a drawing
        pytest.fail(f"README.md line {line}: a ```{language} block; README's blocks are "
                    "python or sh, each run by this test, or a text drawing")


def test_the_opening_block_is_the_two_commands_ci_runs():
    language, code, _line = BLOCKS[OPENING]
    commands = [c for c in (re.sub(r"#.*$", "", x).strip() for x in code.splitlines()) if c]
    assert language == "sh" and len(commands) == 2
    assert commands[0].startswith("pip install .") and "pytest" in commands[1]


def test_the_readme_has_blocks_of_each_kind_and_stays_a_guide():
    kinds = {language for language, _code, _line in BLOCKS}
    assert kinds == {"python", "sh", "text"}
    assert len(BLOCKS) >= 10
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 450
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\bearlier run|\bthis session\b", text)


def test_a_failing_block_fails_the_test(tmp_path):
    # the harness can fail: a command that fails, and a serve that cannot start
    (tmp_path / "a").mkdir()
    assert _run_sh("pybroker databases missing.duckdb", tmp_path / "a").returncode != 0
    (tmp_path / "b").mkdir()
    done = _run_sh(textwrap.dedent("""\
        pybroker serve missing.duckdb
        echo never
        """), tmp_path / "b")
    assert done.returncode != 0 and "never" not in done.stdout
