"""`digestbot dkim`: make a signing key and check that signatures verify."""

from __future__ import annotations

from pathlib import Path

import click

from bot.cli.app import App, console, pass_app, reports_errors
from bot.errors import BotError


@click.group("dkim")
def dkim_group() -> None:
    """DKIM signing: make a key, print its DNS record, check the setup."""


@dkim_group.command("keygen")
@click.option("--selector", help="The DNS selector (default: DIGESTBOT_DKIM_SELECTOR, 'digestbot').")
@click.option("--out", type=click.Path(dir_okay=False),
              help="Where to write the key (default: DIGESTBOT_DKIM_KEY_FILE, else "
                   "var/dkim/SELECTOR.pem next to the database).")
@pass_app
@reports_errors
def keygen(app: App, selector: str | None, out: str | None) -> None:
    """Write a new 2048-bit RSA key and print the DNS TXT record to publish.
    An existing key file is never overwritten."""
    from bot.config import DNS_NAME
    from bot.mailer import dkim

    settings = app.settings
    selector = selector or settings.dkim_selector
    if not DNS_NAME.match(selector):
        raise BotError(f"{selector!r} is not a DNS label", hint="use a name like digestbot or mail2026")
    path = Path(out or settings.dkim_key_file or settings.var_dir / "dkim" / f"{selector}.pem")
    if path.exists():
        raise BotError(f"{path} exists already; it was left as it is",
                       hint="a key in use must not be replaced by accident: give another --out, "
                            "or move the old file away first")
    pem = dkim.generate_key()
    try:
        dkim.write_key(path, pem)
    except OSError as exc:
        raise BotError(f"cannot write {path}: {exc.strerror}", hint="choose a writable --out") from None
    record = dkim.dns_record(selector, dkim.dkim_domain(settings), dkim.public_key_b64(pem))
    console.print(f"wrote a {dkim.KEY_BITS}-bit RSA key to {path} (readable by you only)", markup=False)
    console.print("\npublish this DNS TXT record:", markup=False)
    console.print(f"  name:  {record.name}", markup=False)
    console.print(f"  value: {record.value}", markup=False)
    console.print(f"\nas a zone file line:\n{record.zone_line()}", markup=False)
    console.print("\nthen set", markup=False)
    console.print(f"  DIGESTBOT_DKIM_KEY_FILE={path.resolve()}", markup=False)
    console.print(f"  DIGESTBOT_DKIM_SELECTOR={selector}", markup=False)
    console.print("and, once DNS serves the record, run `digestbot dkim check --dns`.", markup=False)


@dkim_group.command("check")
@click.option("--dns", "use_dns", is_flag=True,
              help="Take the public key from DNS (as receivers do), not from the key file.")
@pass_app
@reports_errors
def check(app: App, use_dns: bool) -> None:
    """Sign a test message with DIGESTBOT_DKIM_KEY_FILE and verify it with the
    public key (the key file's, or with --dns the published record); say what
    is wrong if it does not verify."""
    from bot.mailer import dkim, sender_domain, simple_message

    settings = app.settings
    signer = dkim.signer_from_settings(settings)
    if signer is None:
        raise BotError("DIGESTBOT_DKIM_KEY_FILE is not set: mail goes out unsigned",
                       hint="run `digestbot dkim keygen`, publish the record it prints, then set "
                            "DIGESTBOT_DKIM_KEY_FILE")
    expected = dkim.dns_record(signer.selector, signer.domain, dkim.public_key_b64(signer.private_pem))
    _, message = simple_message(settings, "dkim-check@example.invalid", "DKIM check",
                                "A test message, signed and verified locally; never sent.\n")
    signed = signer.sign(message)
    if use_dns:
        published = dkim.lookup_record(expected.name)
        if published is None:
            raise BotError(f"no DKIM record at {expected.name} in DNS",
                           hint=f"publish this TXT record: {expected.value}")
        if dkim.record_key(published) != dkim.record_key(expected.value):
            raise BotError(f"the record at {expected.name} holds another public key than "
                           f"{settings.dkim_key_file}",
                           hint=f"publish the current key's record: {expected.value}")
        verdict = dkim.verify(signed)
        source = f"the DNS record at {expected.name}"
    else:
        verdict = dkim.verify(signed, dkim.file_dnsfunc(expected))
        source = f"the public key of {settings.dkim_key_file}"
    if not verdict.ok:
        raise BotError(f"the test signature does not verify against {source}: {verdict.problem}",
                       hint="check DIGESTBOT_DKIM_DOMAIN and DIGESTBOT_DKIM_SELECTOR; make a new key "
                            "with `digestbot dkim keygen` if the file is damaged")
    console.print(f"ok: a test message signed with {settings.dkim_key_file} verifies against {source} "
                  f"(rsa-sha256, relaxed/relaxed, d={signer.domain}, s={signer.selector})", markup=False)
    from_domain = sender_domain(settings.from_addr)
    if not _aligned(from_domain, signer.domain):
        console.print(f"warning: DKIM signs for {signer.domain} but mail is From {from_domain}; "
                      "DMARC needs them to share a domain (set DIGESTBOT_DKIM_DOMAIN)", markup=False)
    if not use_dns:
        console.print(f"the DNS record to publish: {expected.name} TXT \"{expected.value}\"; "
                      "`digestbot dkim check --dns` checks it once published", markup=False)


def _aligned(from_domain: str, dkim_domain: str) -> bool:
    """DMARC's relaxed alignment, roughly: one domain is the other or under it."""
    a, b = from_domain.lower(), dkim_domain.lower()
    return a == b or a.endswith("." + b) or b.endswith("." + a)
