#!/usr/bin/env bash
# The Python virtual environment of the compatibility tests: the real prime-sandboxes, verifiers
# and e2b clients from PyPI at the versions pinned in clients/compat/requirements.txt. Built once
# per set of pins (the directory is named by the file's hash) and reused; prints nothing when
# it is already there. The path of its python: packages/server/test/compat-python.ts.
source "$(dirname "$0")/lib/common.sh"
cd "$(dirname "$0")/.."
req=clients/compat/requirements.txt
hash=$(sha256sum "$req" | cut -c1-16)
venv="$SANDTREE_CACHE_DIR/compat-venv/$hash"
if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then exit 0; fi
log "building the compatibility clients' Python environment (prime-sandboxes, verifiers, e2b)"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-input -r "$req"
touch "$venv/.complete"
