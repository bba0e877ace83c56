#!/usr/bin/env bash
# Builds sandtree/desktop: Debian bookworm (debootstrap) with Xvfb, openbox, xdotool, x11vnc,
# xterm, fonts, at-spi and Chromium, plus the guest-side helper `sandtree-desktop` (scripts/desktop/).
# The debootstrapped root is kept as a tarball keyed by the package list, so a change to the
# helper only re-registers the image (seconds); a change to the packages debootstraps again.
source "$(dirname "$0")/lib/common.sh"
root="$(cd "$(dirname "$0")/.." && pwd)"
tool=(node "$root/scripts/image-tool.mjs")
work="$SANDTREE_CACHE_DIR/work"; mkdir -p "$work"

# python3-gi with GTK 3 runs sandtree-gtk-demo, an application with a real at-spi tree (xterm
# has none). Chromium is the web browser computer-use agents drive (sandtree-browser, ctrl+alt+b,
# the open_url/click_element/page_text actions); it makes the image several hundred MB larger.
pkgs=python3,xvfb,openbox,xdotool,x11vnc,xterm,fonts-dejavu-core,x11-utils,wmctrl,at-spi2-core,python3-pyatspi,dbus-daemon,dbus-x11,procps,python3-gi,gir1.2-gtk-3.0,chromium
base="$work/desktop-base-$(printf '%s' "$pkgs" | sha256sum | cut -c1-12).tar"
# The image says what it needs (image-defaults.ts): a create without --display gets this one.
config='{"labels":{"sandtree.display":"1280x800"}}'
stamp="$( { printf '%s\n' "$base" "$config"; cat "$root"/scripts/desktop/*; } | sha256sum | cut -c1-16)"
if "${tool[@]}" has sandtree/desktop && [ "$(cat "$work/desktop.stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
rfs="$work/desktop-rootfs"; rm -rf "$rfs"
if [ ! -f "$base" ]; then
  log "building sandtree/desktop with debootstrap (a few minutes)"
  debootstrap --variant=minbase --include="$pkgs" bookworm "$rfs" "$(apt_mirror)" >"$work/debootstrap-desktop.log" 2>&1 ||
    { tail -20 "$work/debootstrap-desktop.log" >&2; exit 1; }
  rm -rf "$rfs"/var/cache/apt/archives/*.deb "$rfs"/var/lib/apt/lists/*
  tar -C "$rfs" -cf "$base.tmp" . && mv "$base.tmp" "$base"
else
  log "registering sandtree/desktop (helper changed)"
  mkdir -p "$rfs" && tar -C "$rfs" -xf "$base"
fi
echo sandbox > "$rfs/etc/hostname"
install -m 0755 "$root/scripts/desktop/sandtree-desktop" "$rfs/usr/local/bin/sandtree-desktop"
install -m 0755 "$root/scripts/desktop/sandtree-gtk-demo" "$rfs/usr/local/bin/sandtree-gtk-demo"
# The helper's modules (it puts this directory first on its path): the screen, and X11 in-process.
install -d "$rfs/usr/local/lib/sandtree-desktop"
install -m 0644 "$root/scripts/desktop/sandtree_screen.py" "$root/scripts/desktop/sandtree_x11.py" \
  "$root/scripts/desktop/sandtree_browser.py" "$rfs/usr/local/lib/sandtree-desktop/"
install -m 0755 "$root/scripts/desktop/sandtree-browser" "$rfs/usr/local/bin/sandtree-browser"
# openbox's default configuration with our key bindings added (a terminal by keyboard).
sed -e "/<keyboard>/r $root/scripts/desktop/keybinds.xml" "$rfs/etc/xdg/openbox/rc.xml" >"$rfs/etc/xdg/openbox/sandtree-rc.xml"
grep -q 'C-A-b' "$rfs/etc/xdg/openbox/sandtree-rc.xml" || { log "openbox rc.xml has no <keyboard> section"; exit 1; }
"${tool[@]}" register "$rfs" sandtree/desktop "$config"
rm -rf "$rfs"
echo "$stamp" > "$work/desktop.stamp"
