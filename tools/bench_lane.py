"""Lane throughput beside raw UXD and pyzmq ipc: ``raetlike.bench._lane`` run alone.

Usage: ``.venv/bin/python tools/bench_lane.py [--count 100000] [--size 100]
[--repeat 5] [--kind json|msgpack] [--no-big] [--json] [--parts]``
"""

from raetlike.bench._lane import main

if __name__ == "__main__":
    main()
