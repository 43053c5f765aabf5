"""README's first command's job: examples/quickstart.py runs end to end and prints what it promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quickstart_runs_and_reports_counts_and_lag():
    r = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "wrote 10000 messages through the sink" in out, out
    counts = dict(re.findall(r"\|\s*(created|paid|shipped)\|\s*(\d+)\|", out))
    assert counts == {"created": "3333", "paid": "3334", "shipped": "3333"}, out
    assert "total lag: 0" in out, out + r.stderr[-3000:]
    assert "emulator stopped" in out, out
