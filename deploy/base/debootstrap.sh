#!/usr/bin/env bash
# Usage: debootstrap.sh MIRROR SUITE OUT.tar
# A minimal Debian root filesystem as a tar for `podman import` / `docker import`,
# the base of the stand-in images (deploy/base/*.Containerfile). It carries the
# host's extra CA certificates (an egress proxy's, where there is one) so that apt
# and pip inside the builds reach the registries the host reaches, and pip is told
# to use the system bundle (a venv's pip otherwise trusts its own copy only).
set -euo pipefail
mirror="$1" suite="$2" out="$3"
root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror" >&2
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null
fi
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$root/etc/pip.conf"
cat > "$root/etc/apt/sources.list" <<SOURCES
deb $mirror $suite main
deb $mirror $suite-updates main
SOURCES
# Images stay small: no apt lists, no docs beyond copyright.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
tar --numeric-owner -C "$root" -cf "$out" .
