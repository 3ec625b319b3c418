"""``python -m raetlike.pipeline ARGS`` and ``spark-submit .../raetlike/pipeline/__main__.py ARGS``.

Same arguments as ``raetlike pipeline``.
"""

import sys

from raetlike.cli import main

if __name__ == "__main__":
    sys.exit(main(["pipeline", *sys.argv[1:]]))
