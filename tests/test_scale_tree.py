"""tools/scale_tree.py in its small mode: a few hundred estates, all joined, a request answered."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parent.parent / "tools" / "scale_tree.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("scale_tree", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scale_tree"] = module  # (dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def test_a_tree_of_three_relays_and_three_hundred_leaves_joins_idles_and_answers() -> None:
    figures = _tool().run(3, 100, idle=3.0, requests=5, use_tracemalloc=True)
    assert figures["estates"] == 304
    assert figures["all_allowed"]
    assert figures["allowed"] == 303
    assert figures["routed"]
    assert 0 < figures["allowed_virtual_s"] <= figures["routed_virtual_s"] < 30
    assert figures["answered"] == 5
    assert figures["bus_links_lost"] == 0
    assert figures["datagrams_dropped"] == 0
    # four link hops of 0.5 ms each way at least; well under a bus retry (5 s)
    assert 2.0 <= figures["request_virtual_ms_p50"] <= figures["request_virtual_ms_max"] < 1000
    # idle: the top hears its 3 relays, a relay its 100 leaves and the top, about once a
    # second each (presence checks and bus keepalives, coalesced in fast mode)
    assert 1 <= figures["top_datagrams_in_per_s"] <= 30
    assert 50 <= figures["relay_datagrams_in_per_s"] <= 1000
    # (RSS growth can read 0 in a process whose heap already had room: the suite's; what
    # the estates allocated is traced instead)
    assert 5 < figures["traced_per_estate_kb"] < 1000
    assert figures["allowed_cpu_s"] > 0
