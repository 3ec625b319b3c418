"""The compiled hot paths, built here from our own sources with the machine's C compiler.

Each is optional: without a compiler (or with ``RAETLIKE_PURE_PYTHON`` set at install)
raetlike installs and runs its pure-Python twins.  docs/performance.md, "The compiled
build", says what is compiled and why mypyc.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import Extension, setup

ROOT = Path(__file__).resolve().parent

# Compiled with mypyc from the same typed sources that run as Python (mypy --strict already
# holds them to their annotations): the fast mode's per-datagram path, and the durable
# store's bookkeeping around each message (docs/performance.md, "The compiled build").
MYPYC_MODULES = [
    "road._fast_control", "road._fast_wire", "road._fast_send", "road._fast_recovery",
    "road._fast_receive", "road._fast_link",
    "lane.coalesce", "lane.pages", "lane.stack", "lane.yard", "lane.stats",
    "raetlike.durable._log", "raetlike.durable._outbox", "raetlike.durable._seen",
    "raetlike.durable._road",
]
RECORD = ROOT / "raetlike" / "_compiled_sources.json"


def c_extensions() -> list[Extension]:
    """The hand-written C parts: the journal's line writer, the durable outbox's put,
    libsodium's per-packet calls without ctypes (it needs no libsodium headers: it finds the
    library libnacl loaded at run time, with dlopen) and the lane driver's batched syscalls
    (recvmmsg/sendmmsg, Linux)."""
    return [
        Extension("raetlike._cmmsg", ["raetlike/_cmmsg.c"], optional=True),
        Extension("raetlike.journal._cjournal", ["raetlike/journal/_cjournal.c"], optional=True),
        Extension("raetlike.durable._cdurable", ["raetlike/durable/_cdurable.c"],
                  libraries=["z"], optional=True),
        # -ldl: glibc before 2.34 keeps dlopen there (later ones have it in libc and an empty
        # libdl for old builds)
        Extension("raetlike._csodium", ["raetlike/_csodium.c"], libraries=["dl"],
                  optional=True),
    ]


def mypyc_extensions() -> list[Extension]:
    """The modules above through mypyc, and a record of the sources compiled (raetlike's
    import runs the sources instead when one no longer matches its record)."""
    RECORD.unlink(missing_ok=True)
    if os.environ.get("RAETLIKE_PURE_PYTHON"):
        return []
    try:
        from mypyc.build import mypycify  # noqa: PLC0415 - only at build time
    except ImportError:
        return []
    paths = [module.replace(".", "/") + ".py" for module in MYPYC_MODULES]
    # the build runs in an isolated environment without raetlike's dependencies: their
    # imports are Any here, and errors outside the compiled modules (orjson's types, say)
    # are not this build's to report (mypy --strict checks the whole tree in the tests)
    try:
        extensions = mypycify([*paths, "--ignore-missing-imports", "--follow-imports=silent"],
                              group_name="raetlike._compiled", opt_level="3")
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - optional, as the C parts are
        # (mypyc exits on a type error): install the sources; tests/test_compiled_build.py
        # then fails unless RAETLIKE_PURE_PYTHON says the pure path is meant
        sys.stderr.write(f"raetlike: mypyc could not compile ({exc!r}); using the Python "
                         "sources\n")
        return []
    for extension in extensions:
        extension.optional = True
    RECORD.write_text(json.dumps({
        module: hashlib.sha256((ROOT / path).read_bytes()).hexdigest()
        for module, path in zip(MYPYC_MODULES, paths, strict=True)
    }, indent=1) + "\n")
    return extensions


# setuptools runs this file once per build step: only the steps that build extensions need
# mypyc's C (it takes seconds), not those that only ask for metadata or requirements
_BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}
setup(ext_modules=[*c_extensions(),
                   *(mypyc_extensions() if _BUILDS.intersection(sys.argv[1:]) else [])])
