#!/usr/bin/env bash
# Set up the project venv and run the raetlike demo on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/_venv.sh spark   # only what the demo needs: raetlike, PySpark, matplotlib
exec raetlike demo "$@"
