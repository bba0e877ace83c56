#!/usr/bin/env bash
# The main job on embedded defaults: start `sandtree serve`, then create a Debian sandbox, run
# commands, upload and download a file, delete the sandbox, and stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."
export SANDTREE_DATA_DIR="${SANDTREE_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/sandtree}"
sandtree() { node packages/cli/dist/main.js "$@"; }
# Shows each demo command before running it.
step() { printf '\n$ sandtree %s\n' "$*" >&2; sandtree "$@"; }
log="$(mktemp -t sandtree-serve.XXXXXX.log)"
node packages/cli/dist/main.js serve --data-dir "$SANDTREE_DATA_DIR" >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  if [ -f "$SANDTREE_DATA_DIR/credentials.env" ] && node -e 'fetch("http://127.0.0.1:7070/healthz").then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' ; then break; fi
  kill -0 $server 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.2
done
# shellcheck disable=SC1091
source "$SANDTREE_DATA_DIR/credentials.env"
echo "server: $SANDTREE_API_URL (log: $log)"
id=$(step sandbox create sandtree/debian --name demo --memory-gb 0.5 --wait)
echo "$id"
step sandbox run "$id" -- uname -a
step sandbox run "$id" -- python3 -c 'import sys; print("hello from python", sys.version.split()[0])'
echo "some data $(date)" > /tmp/sandtree-demo.txt
step sandbox upload "$id" /tmp/sandtree-demo.txt /root/demo.txt
step sandbox run "$id" -- sh -c 'wc -c /root/demo.txt && sha256sum /root/demo.txt'
step sandbox download "$id" /root/demo.txt /tmp/sandtree-demo.back.txt
cmp /tmp/sandtree-demo.txt /tmp/sandtree-demo.back.txt && echo "downloaded file matches the upload"
step sandbox get "$id"
step sandbox delete "$id" -y
echo "demo complete"
