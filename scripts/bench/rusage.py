#!/usr/bin/env python3
"""rusage.py OUT cmd...: runs cmd and writes "wall user sys maxrss_kb nvcsw nivcsw" to
OUT, as /usr/bin/time -f '%e %U %S %M %w %c' does but to the microsecond (getrusage of
the child: CPU times, peak RSS, voluntary and involuntary context switches); exits with
the command's status."""
import os
import subprocess
import sys
import time

out, cmd = sys.argv[1], sys.argv[2:]
start = time.monotonic()
child = subprocess.Popen(cmd)
_, status, usage = os.wait4(child.pid, 0)
wall = time.monotonic() - start
with open(out, "w") as f:
    f.write(
        f"{wall:.6f} {usage.ru_utime:.6f} {usage.ru_stime:.6f} {usage.ru_maxrss} "
        f"{usage.ru_nvcsw} {usage.ru_nivcsw}\n"
    )
sys.exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
