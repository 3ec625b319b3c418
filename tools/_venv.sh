# Sourced by tools/demo.sh and tools/test.sh: make (or reuse) the project venv
# at .venv and install raetlike with the given extras into it.  Re-installs
# only when pyproject.toml, setup.py, a C source or a module mypyc compiles (setup.py)
# changed since the last install.
set -euo pipefail
extras="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
py="${PYTHON:-python3.11}"
command -v "$py" >/dev/null 2>&1 || py=python3
if [ ! -x "$venv/bin/python" ]; then
    echo "raetlike: creating venv at $venv" >&2
    "$py" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip setuptools 2>&1 | { grep -v '^WARNING: Location' >&2 || true; }
fi
stamp="$venv/.raetlike-$extras"
# the compiled sources count too: a changed .c file or compiled module is built again
want="$(cat "$root/pyproject.toml" "$root/setup.py" "$root"/raetlike/*.c "$root"/raetlike/*/*.c "$root"/road/_fast*.py "$root"/lane/*.py "$root"/raetlike/durable/*.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "raetlike: installing .[$extras] into $venv" >&2
    # pipefail: a failed install stops here, loudly
    "$venv/bin/python" -m pip install -q -e "$root[$extras]" 2>&1 | { grep -v '^WARNING: Location' >&2 || true; }
    "$venv/bin/python" -c "import raetlike"
    echo "$want" > "$stamp"
fi
export PATH="$venv/bin:$PATH"
