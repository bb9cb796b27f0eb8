#!/bin/sh
# A newcomer on a fresh Debian 12: build a bookworm chroot with debootstrap (nothing but what Debian
# installs by default), copy this checkout into it, run the README's first set-up command there as
# root and check the bundled example's output. Needs root, debootstrap and deb.debian.org + PyPI.
#
#   sudo sh tests/newcomer/debian12.sh [CHROOT_DIR]     (default: a new directory under /var/tmp)
#
# Prints the time each step took; exits 0 when the example ran and found its planted bug.
# Takes several minutes (debootstrap downloads ~100 MB), so it is not part of .ci/run; the slow
# test tests/newcomer/newcomer_debian12.py runs it (by name only).
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "debian12.sh: run as root (debootstrap and chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "debian12.sh: apt-get install debootstrap" >&2; exit 2; }
root=${1:-$(mktemp -d /var/tmp/patchbench-debian12.XXXXXX)}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
log=$root.log
started=$(date +%s)
step() { echo "[$(( $(date +%s) - started )) s] $*"; }

cleanup() {
  umount "$root/proc" 2>/dev/null || true
  umount "$root/dev" 2>/dev/null || true
}
trap cleanup EXIT

# The README's first command: the first indented line after "## Set-up".
command=$(awk '/^## Set-up/ {on=1; next} on && /^    / {sub(/^    /, ""); print; exit}' "$repo/README.md")
[ -n "$command" ] || { echo "debian12.sh: no set-up command found in README.md" >&2; exit 2; }

step "debootstrap bookworm into $root (log: $log)"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$log" 2>&1
# This host's network, nothing else of it: its resolver and, where pip here must trust a proxy's
# certificate authority (PIP_CERT), that bundle for the chroot's pip.
cp /etc/resolv.conf "$root/etc/resolv.conf"
cert_env=""
if [ -n "${PIP_CERT:-}" ] && [ -f "$PIP_CERT" ]; then
  cp "$PIP_CERT" "$root/etc/host-ca-bundle.pem"
  cert_env="PIP_CERT=/etc/host-ca-bundle.pem"
fi
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"

step "copy the checkout (tracked files and changes, no .git) to /root/patchbench"
mkdir -p "$root/root/patchbench"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 tar -cf - 2>/dev/null) |
  tar -xf - -C "$root/root/patchbench"

step "run: $command"
status=0
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin $cert_env \
  sh -c "cd /root/patchbench && $command" >"$root.out" 2>&1 || status=$?
cat "$root.out"
step "the command exited $status"

# The demo prints the series with its trailers, then the finding on patch 2 (demo.sh exits 0 then).
grep -q "Reviewed-by: Bob Reviewer <bob@example.com>" "$root.out" &&
  grep -q "pbdemo_peek_len" "$root.out" &&
  grep -q "^exit 1: findings" "$root.out" && [ "$status" -eq 0 ] || {
  step "FAILED: the example did not run as the README says"; exit 1; }
step "OK: the README's first command works on a fresh Debian 12"
