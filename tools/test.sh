#!/usr/bin/env bash
# Set up the project venv and run the whole test suite: lint, types, tests.
# Extra arguments go to pytest (e.g. `tools/test.sh -m slow`).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/_venv.sh test
echo "== ruff" && ruff check raetlike road lane tests tools
echo "== mypy --strict" && mypy
echo "== pytest" && python -m pytest "$@"
