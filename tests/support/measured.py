"""``evalgate ARGS...`` in a child process that reports its own cost as it exits.

The peak is VmHWM, the high-water mark of the child's own memory: ``ru_maxrss`` from
``wait4`` counts the forking parent's pages too (a test run whose pytest holds 700 MB would
read 700 MB for every child). The time is the child's CPU time (user + system), which load on
the machine does not stretch the way it stretches wall time; the wall clock only bounds a hang.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_REPORT = (
    "import atexit, os, resource, runpy, sys\n"
    "def report():\n"
    "    hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
    "    use = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    with open(os.environ['EVALGATE_COST_FILE'], 'w') as out:\n"
    '        out.write(f"{hwm[0].split()[1]} {use.ru_utime + use.ru_stime}")\n'
    "atexit.register(report)\n"
    "sys.argv[0] = 'evalgate'\n"
    "runpy.run_module('evalgate', run_name='__main__')\n"
)


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    peak_mb: float
    cpu_s: float


def run_measured(
    argv: Sequence[str], env: Mapping[str, str], folder: Path, *, hang_s: float = 300
) -> Measured:
    """Run ``evalgate ARGV`` (``folder`` holds the cost file); a hang past ``hang_s`` of wall
    time raises ``subprocess.TimeoutExpired``."""
    cost = folder / "evalgate-cost"
    done = subprocess.run(
        [sys.executable, "-c", _REPORT, *argv],
        capture_output=True,
        text=True,
        timeout=hang_s,
        env={**env, "EVALGATE_COST_FILE": str(cost)},
        check=False,
    )
    kib, cpu = cost.read_text(encoding="utf-8").split()
    return Measured(done.returncode, done.stdout, done.stderr, int(kib) / 1024, float(cpu))


__all__ = ["Measured", "run_measured"]
