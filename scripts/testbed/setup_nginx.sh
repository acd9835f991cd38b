#!/usr/bin/env bash
# Makes sure nginx (Debian's package) is installed, for the tests through a real reverse
# proxy (cli/tests/it/gateways.rs), and prints the path of its binary. Installs it with
# apt-get when missing (as root, or through sudo); the system service is not started:
# the tests run their own nginx on free ports with a configuration of their own.
. "$(dirname "$0")/../common.sh"
NGINX="$(command -v nginx || true)"
[ -n "$NGINX" ] || [ ! -x /usr/sbin/nginx ] || NGINX=/usr/sbin/nginx
if [ -z "$NGINX" ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  log "installing nginx (Debian package)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx >&2 \
    || { $SUDO apt-get update -q >&2 && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx >&2; } \
    || die "cannot install nginx with apt-get"
  NGINX="$(command -v nginx || echo /usr/sbin/nginx)"
fi
[ -x "$NGINX" ] || die "no nginx binary after installing it"
echo "$NGINX"
