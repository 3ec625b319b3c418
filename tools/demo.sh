#!/usr/bin/env bash
# Set up the project venv and run the raetlike demo on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/_venv.sh test
exec raetlike demo "$@"
