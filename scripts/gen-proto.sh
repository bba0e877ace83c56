#!/usr/bin/env bash
# Generates TypeScript for the server's Connect services (packages/server/proto -> src/gen), the
# tests' (test/proto -> test/gen) and the host's remote host service (packages/host/proto ->
# src/gen) with the pinned buf and protoc-gen-es. Generated files are committed;
# connect-engine.test.ts and remote-host-gen.test.ts fail when they are stale.
set -euo pipefail
cd "$(dirname "$0")/../packages/server"
export PATH="$PWD/../../node_modules/.bin:$PATH"
for pair in "proto:buf.gen.yaml:src/gen" "test/proto:buf.gen.test.yaml:test/gen"; do
  IFS=: read -r dir template out <<<"$pair"
  rm -rf "$out"
  if [ -n "$(find "$dir" -name '*.proto' -print -quit)" ]; then buf generate --template "$template"; fi
done
cd ../host
rm -rf src/gen
buf generate --template buf.gen.yaml
