#!/usr/bin/env bash
# Generates TypeScript for the server's Connect services (packages/server/proto -> src/gen), the
# tests' (test/proto -> test/gen) and the host's remote host service (packages/host/proto ->
# src/gen) with the pinned buf and protoc-gen-es (local plugin: no network). `npm run build` runs
# it first; the generated folders are not committed (.gitignore). A file is rewritten only when
# its content changes, so `tsc -b` stays incremental; scripts/test/proto-gen.test.ts fails when
# the folders do not match the .proto files.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$root/node_modules/.bin:$PATH"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# gen PACKAGE_DIR PROTO_DIR TEMPLATE OUT: generate into a scratch folder, then sync OUT to it.
gen() {
  local pkg="$1" protos="$2" template="$3" out="$4" fresh="$tmp/$1/$4" f
  [ -n "$(find "$pkg/$protos" -name '*.proto' -print -quit)" ] || { rm -rf "${pkg:?}/$out"; return 0; }
  (cd "$pkg" && buf generate --template "$template" -o "$tmp/$1")
  mkdir -p "$pkg/$out"
  (cd "$fresh" && find . -type f) | while read -r f; do
    if ! cmp -s "$fresh/$f" "$pkg/$out/$f"; then mkdir -p "$(dirname "$pkg/$out/$f")" && cp "$fresh/$f" "$pkg/$out/$f"; fi
  done
  (cd "$pkg/$out" && find . -type f) | while read -r f; do [ -e "$fresh/$f" ] || rm -f "$pkg/$out/$f"; done
  find "$pkg/$out" -mindepth 1 -type d -empty -delete
}

cd "$root"
gen packages/server proto buf.gen.yaml src/gen
gen packages/server test/proto buf.gen.test.yaml test/gen
gen packages/host proto buf.gen.yaml src/gen
