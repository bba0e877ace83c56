#!/usr/bin/env bash
# Installs the Debian packages sandtree needs (only those missing, so a rerun takes seconds).
source "$(dirname "$0")/lib/common.sh"
pkgs=(qemu-system-x86 qemu-utils busybox-static cpio e2fsprogs debootstrap docker-registry skopeo
      umoci kmod zstd gcc libc6-dev make clang libclang-rt-14-dev tar gzip iproute2 nftables acl ca-certificates python3
      python3-pytest python3-pytest-asyncio python3-httpx python3-build python3-setuptools python3-wheel python3-venv python3-pip
      chromium fonts-dejavu-core postgresql-15 nfs-ganesha nfs-ganesha-vfs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then log "Debian packages present"; exit 0; fi
log "installing: ${missing[*]}"
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
