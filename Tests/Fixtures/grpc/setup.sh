#!/usr/bin/env bash
# Creates the Python environment of the gRPC fixtures (grpcio, grpcio-tools):
# a venv at .build/grpc-venv of the repository, or at $1. Idempotent: a venv
# whose packages already match requirements.txt is left as it is. .ci/run
# calls it; developers run it once:
#
#     Tests/Fixtures/grpc/setup.sh
#
# The tests find the interpreter at .build/grpc-venv/bin/python, or wherever
# ASSERTGATE_GRPC_PYTHON points.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
venv="${1:-$root/.build/grpc-venv}"
requirements="$here/requirements.txt"

# Debian's interpreter, not whatever python3 is first on PATH.
python=/usr/bin/python3
[ -x "$python" ] || { echo "setup.sh: $python is missing (apt-get install python3 python3-venv)" >&2; exit 1; }

wanted() { grep -vE '^\s*(#|$)' "$requirements" | tr '[:upper:]_' '[:lower:]-' | sort; }
installed() { "$venv/bin/python" -m pip freeze --all 2>/dev/null | tr '[:upper:]_' '[:lower:]-' | sort; }

if [ -x "$venv/bin/python" ] && [ -z "$(comm -23 <(wanted) <(installed))" ] &&
    "$venv/bin/python" -c 'import grpc, grpc_tools.protoc' 2>/dev/null; then
    echo "grpc venv: $venv is up to date"
    exit 0
fi

echo "grpc venv: creating $venv"
# Only ever removes a venv (a path given by mistake is refused, not wiped).
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
    echo "setup.sh: $venv exists and is not a venv; not touching it" >&2
    exit 1
fi
rm -rf "$venv"
"$python" -m venv "$venv" || {
    echo "setup.sh: '$python -m venv' failed: install python3-venv (apt-get install python3-venv)" >&2
    exit 1
}
# Wheels only: a source build would need a compiler and minutes, and would
# hide that the pinned versions have no wheel for this platform.
# Three tries: a registry hiccup on a fresh machine must not fail a CI run.
for attempt in 1 2 3; do
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: -r "$requirements" && break
    echo "setup.sh: pip install failed (attempt $attempt of 3)" >&2
    [ "$attempt" -lt 3 ] || exit 1
    sleep $((attempt * 10))
done
"$venv/bin/python" -c 'import grpc, grpc_tools.protoc; print("grpc venv: grpcio", grpc.__version__)'
