"""A throwaway Dovecot (IMAP and POP3) for the tests, like tests/pg.py for PostgreSQL.

Its own configuration in a temporary folder: listening on 127.0.0.1 on free
ports, one passwd-file user, mail in a Maildir under the same folder, plain
text logins (``ssl = no``) or, with ``tls=True``, IMAPS/POP3S with a
self-signed certificate for 127.0.0.1 that a test may choose to trust. A
system-wide Dovecot and its mail are never touched. Only the binaries of
Debian's dovecot-core, -imapd and -pop3d are needed (scripts/install-system-deps.sh).

As root (CI containers) mail is owned by ``nobody`` and Dovecot's own
``dovecot``/``dovenull`` users run its helpers; otherwise everything runs
as the current user, with the login processes not chrooted.
"""

from __future__ import annotations

import datetime as dt
import imaplib
import ipaddress
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

from helpers import free_port, wait_until

USER, PASSWORD = "bounces", "s3cret pass"
INSTALL_HINT = "sh scripts/install-system-deps.sh installs Debian's dovecot-core, dovecot-imapd, dovecot-pop3d"


def binary() -> str | None:
    return shutil.which("dovecot") or ("/usr/sbin/dovecot" if os.access("/usr/sbin/dovecot", os.X_OK) else None)


def unavailable() -> str | None:
    """Why Dovecot cannot be started here, in one line; None when it can."""
    if binary() is None:
        return f"dovecot is not installed ({INSTALL_HINT})"
    if not (Path("/usr/lib/dovecot/imap").exists() and Path("/usr/lib/dovecot/pop3").exists()):
        return f"dovecot's imap or pop3 server is not installed ({INSTALL_HINT})"
    return None


class Dovecot:
    """One Dovecot instance of our own; ``stop`` removes everything."""

    def __init__(self, tls: bool = False) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="digestbot-dovecot-"))
        self.root.chmod(0o755)  # the mail user (nobody, as root) must reach its Maildir
        self.tls = tls
        self.imap_port, self.pop3_port = free_port(), free_port()
        self.cert: Path | None = None
        self.maildir = self.root / "mail" / USER
        self.proc: subprocess.Popen[bytes] | None = None
        (self.root / "run").mkdir()
        (self.root / "state").mkdir()
        (self.root / "mail").mkdir()
        (self.root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
        if tls:
            self.cert, key = self._self_signed()
        self.config = self.root / "dovecot.conf"
        self.config.write_text(self._config(key if tls else None))

    # --- set-up ---------------------------------------------------------------------------

    def _users(self) -> tuple[str, str]:
        """(mail uid, mail gid) and the chown of the mail folder."""
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.root / "mail", nobody.pw_uid, nobody.pw_gid)
            return str(nobody.pw_uid), str(nobody.pw_gid)
        return str(os.getuid()), str(os.getgid())

    def _config(self, key: Path | None) -> str:
        uid, gid = self._users()
        me = pwd.getpwuid(os.getuid()).pw_name
        not_root = "" if os.geteuid() == 0 else f"""
default_internal_user = {me}
default_login_user = {me}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
service pop3-login {{
  chroot =
}}
"""
        ssl = (f"ssl = required\nssl_cert = <{self.cert}\nssl_key = <{key}\n" if key
               else "ssl = no\ndisable_plaintext_auth = no\n")
        imap, pop3 = ("imaps", "pop3s") if key else ("imap", "pop3")
        other_imap, other_pop3 = ("imap", "pop3") if key else ("imaps", "pop3s")
        return f"""# a throwaway Dovecot for digestbot's tests
base_dir = {self.root}/run
state_dir = {self.root}/state
instance_name = digestbot-test-{self.imap_port}
protocols = imap pop3
listen = 127.0.0.1
{ssl}auth_mechanisms = plain login
log_path = {self.root}/dovecot.log
mail_location = maildir:{self.root}/mail/%u
first_valid_uid = 1
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {self.root}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={self.root}/mail/%u
}}
service imap-login {{
  inet_listener {imap} {{
    address = 127.0.0.1
    port = {self.imap_port}
  }}
  inet_listener {other_imap} {{
    port = 0
  }}
}}
service pop3-login {{
  inet_listener {pop3} {{
    address = 127.0.0.1
    port = {self.pop3_port}
  }}
  inet_listener {other_pop3} {{
    port = 0
  }}
}}
{not_root}"""

    def _self_signed(self) -> tuple[Path, Path]:
        """A certificate for 127.0.0.1 and localhost, signed by its own key."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        cert_path, key_path = self.root / "cert.pem", self.root / "key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        key_path.chmod(0o600)
        return cert_path, key_path

    # --- running --------------------------------------------------------------------------

    def start(self) -> None:
        exe = binary()
        assert exe
        self.proc = subprocess.Popen([exe, "-F", "-c", str(self.config)], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)

        def listening() -> bool:
            assert self.proc is not None
            return self.proc.poll() is not None or (_open(self.imap_port) and _open(self.pop3_port))
        if not wait_until(listening, timeout=20) or self.proc.poll() is not None:
            output = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
            log = (self.root / "dovecot.log").read_text(errors="replace") \
                if (self.root / "dovecot.log").exists() else ""
            self.stop()
            raise RuntimeError(f"dovecot did not start: {output}\n{log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and self.proc.stdout:
            self.proc.stdout.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # --- what tests use ---------------------------------------------------------------------

    def url(self, scheme: str = "imap", folder: str = "INBOX", password: str = PASSWORD) -> str:
        from urllib.parse import quote

        port = self.imap_port if scheme.startswith("imap") else self.pop3_port
        path = f"/{quote(folder)}" if scheme.startswith("imap") else ""
        return f"{scheme}://{USER}:{quote(password, safe='')}@127.0.0.1:{port}{path}"

    def client(self) -> imaplib.IMAP4:
        """A logged-in IMAP client on INBOX (plain, or TLS trusting our certificate)."""
        if self.tls:
            import ssl

            context = ssl.create_default_context(cafile=str(self.cert))
            conn: imaplib.IMAP4 = imaplib.IMAP4_SSL("127.0.0.1", self.imap_port, ssl_context=context)
        else:
            conn = imaplib.IMAP4("127.0.0.1", self.imap_port)
        conn.login(USER, PASSWORD)
        conn.select("INBOX")
        return conn

    def deliver(self, messages: list[bytes]) -> None:
        """Put mail in INBOX, as the mail server would have."""
        conn = self.client()
        try:
            for raw in messages:
                typ, data = conn.append("INBOX", None, None, raw)
                assert typ == "OK", data
        finally:
            conn.logout()

    def flags(self) -> dict[str, set[str]]:
        """Message-ID (else Subject) -> the flags of every mail in INBOX."""
        import email

        conn = self.client()
        try:
            typ, data = conn.fetch("1:*", "(FLAGS BODY.PEEK[HEADER.FIELDS (MESSAGE-ID SUBJECT)])")
            result: dict[str, set[str]] = {}
            for item in data:
                if not isinstance(item, tuple):
                    continue
                meta = item[0].decode()
                flags = set(meta.split("FLAGS (", 1)[1].split(")", 1)[0].split())
                head = email.message_from_bytes(item[1])
                key = str(head.get("Message-ID") or head.get("Subject", "")).strip()
                result[key] = flags - {"\\Recent"}
            return result
        finally:
            conn.logout()


def _open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
