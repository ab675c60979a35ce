#!/bin/sh
# Install the Debian packages the tests use, if they are missing:
#   chromium + fonts-noto-cjk  render the email and take screenshots (CJK glyphs)
#   docker-compose             validate docker-compose.yml without a Docker engine
set -e
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
[ -d /usr/share/fonts/opentype/noto ] && fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || missing="$missing fonts-noto-cjk"
command -v docker-compose >/dev/null 2>&1 || missing="$missing docker-compose"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "note: missing system packages:$missing (install them to run every test; tests that need them are skipped)" >&2
    exit 0
fi
echo "installing system packages:$missing"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
