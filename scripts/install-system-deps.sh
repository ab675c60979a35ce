#!/bin/sh
# Install the Debian packages the tests use, if they are missing:
#   chromium + fonts-noto-cjk  render the email and take screenshots (CJK glyphs)
#   docker-compose             validate docker-compose.yml without a Docker engine
#   postgresql                 the server binaries (initdb, pg_ctl) for the throwaway
#                              cluster the database tests start (tests/pg.py)
#   spamassassin               score a real digest and confirmation mail (tests/test_spam.py)
#   dovecot-core, -imapd,      a throwaway IMAP/POP3 server holding bounce samples; the
#   -pop3d                     test starts its own on 127.0.0.1 (tests/test_bounces.py)
set -e
missing=""
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
[ -d /usr/share/fonts/opentype/noto ] && fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || missing="$missing fonts-noto-cjk"
command -v docker-compose >/dev/null 2>&1 || missing="$missing docker-compose"
# Debian keeps initdb off PATH, in /usr/lib/postgresql/<version>/bin
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1 \
    || missing="$missing postgresql"
command -v spamassassin >/dev/null 2>&1 || missing="$missing spamassassin"
# Debian keeps the dovecot binary in /usr/sbin, which a non-root PATH may lack
[ -x /usr/sbin/dovecot ] || command -v dovecot >/dev/null 2>&1 || missing="$missing dovecot-core"
[ -e /usr/lib/dovecot/imap ] || missing="$missing dovecot-imapd"
[ -e /usr/lib/dovecot/pop3 ] || missing="$missing dovecot-pop3d"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "note: missing system packages:$missing (install them to run every test; tests that need them are skipped)" >&2
    exit 0
fi
echo "installing system packages:$missing"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
