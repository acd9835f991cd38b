#!/usr/bin/env bash
# Makes sure Chromium (Debian's package) is installed, for the tests that load the HTML
# reports in a real headless browser (cli/tests/it/html_reports.rs) and for the report
# screenshots (scripts/bench/report_screenshots.sh), and prints the path of its binary.
# Installs it with apt-get when missing (as root, or through sudo).
. "$(dirname "$0")/../common.sh"
CHROMIUM="$(command -v chromium || true)"
[ -n "$CHROMIUM" ] || [ ! -x /usr/bin/chromium ] || CHROMIUM=/usr/bin/chromium
if [ -z "$CHROMIUM" ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  log "installing chromium (Debian package)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2 \
    || { $SUDO apt-get update -q >&2 && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium >&2; } \
    || die "cannot install chromium with apt-get"
  CHROMIUM="$(command -v chromium || echo /usr/bin/chromium)"
fi
[ -x "$CHROMIUM" ] || die "no chromium binary after installing it"
echo "$CHROMIUM"
