# Shared helpers for the setup scripts. Sourced, not run.
set -euo pipefail
SANDTREE_CACHE_DIR="${SANDTREE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sandtree}"
export SANDTREE_CACHE_DIR
log() { printf '[setup] %s\n' "$*" >&2; }
# The Debian mirror this machine's apt uses (never written into the project).
apt_mirror() {
  local m=""
  if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
    m=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources)
  fi
  if [ -z "$m" ] && [ -f /etc/apt/sources.list ]; then
    m=$(awk '$1=="deb" && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' /etc/apt/sources.list)
  fi
  [ -n "$m" ] || { echo "no Debian mirror found in the apt configuration" >&2; return 1; }
  printf '%s\n' "$m"
}
