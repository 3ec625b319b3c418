"""Run RAET 0.6.8 as a live peer, in a subprocess, with its shims.

``run_raet(script, payload)`` runs ``script`` (Python source) in a fresh
interpreter that has imported :mod:`tests.raetpeer.shim` first.  The script
reads its input with ``load_input()`` and reports with ``emit(obj)``; both are
JSON with bytes written as ``{"$hex": "..."}``.  The shims never touch the
test process itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

PRELUDE = '''
import sys, json
sys.path.insert(0, {here!r})
import shim  # noqa
def _enc(o):
    if isinstance(o, (bytes, bytearray)):
        return {{"$hex": bytes(o).hex()}}
    if isinstance(o, dict):
        return {{k: _enc(v) for k, v in o.items()}}
    if isinstance(o, (list, tuple)):
        return [_enc(v) for v in o]
    return o
def _dec(o):
    if isinstance(o, dict):
        if set(o) == {{"$hex"}}:
            return bytes.fromhex(o["$hex"])
        return {{k: _dec(v) for k, v in o.items()}}
    if isinstance(o, list):
        return [_dec(v) for v in o]
    return o
def load_input():
    return _dec(json.loads(sys.stdin.read() or "null"))
def emit(obj):
    sys.stdout.write(json.dumps(_enc(obj)))
    sys.stdout.flush()
'''


def encode(obj: Any) -> Any:
    """JSON-ready form of ``obj`` with bytes as ``{"$hex": ...}``."""
    if isinstance(obj, bytes | bytearray):
        return {"$hex": bytes(obj).hex()}
    if isinstance(obj, dict):
        return {k: encode(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [encode(v) for v in obj]
    return obj


def decode(obj: Any) -> Any:
    """Inverse of :func:`encode`."""
    if isinstance(obj, dict):
        if set(obj) == {"$hex"}:
            return bytes.fromhex(obj["$hex"])
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj


def raet_command(script: str) -> list[str]:
    """The argv that runs ``script`` under the RAET shims (for long-lived peers)."""
    source = PRELUDE.format(here=str(HERE)) + textwrap.dedent(script)
    return [sys.executable, "-c", source]


def run_raet(script: str, payload: Any = None, timeout: float = 60.0) -> Any:
    """Run ``script`` in a RAET 0.6.8 subprocess and return what it emitted."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        raet_command(script),
        input=json.dumps(encode(payload)),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"RAET peer failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return decode(json.loads(proc.stdout))
