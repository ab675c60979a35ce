"""What one mail from the bounce mailbox is: a pure function of its bytes.

- A *complaint*: an ARF report (RFC 5965, ``multipart/report;
  report-type=feedback-report``) that a feedback loop sends when a reader
  presses "this is spam".
- A *bounce* or a *delay*: a delivery status notification (RFC 3464) or one
  of the common non-standard bounce formats (Exim, qmail, old Exchange...),
  read by flufl.bounce; permanent failures are bounces, temporary ones delays.
  Only mail that looks like it comes from a mail system is read this way, so
  a person's reply that quotes an error is never taken for a bounce.
- An *unsubscribe*: a mail with the subject "unsubscribe <token>", as the
  ``mailto:`` of the List-Unsubscribe header asks for (``bot.tokens``); a
  bare "unsubscribe" is one too, without a token, which ``apply`` believes
  no more than a forged one.
- Anything else is *ignored*: not understood, so it stays in the mailbox for
  a person to read (out-of-office replies, spam, success notices, replies).

What a mail says about *whom* it concerns is collected here and judged in
``apply``, which acts on the bot's own evidence only: VERP tokens in the
addresses it was sent to (``bot.mailer.verp``), the Message-IDs of our own
message in the returned headers, the signed token of an unsubscribe mail.
The recipient addresses a report names, its From, and any
Authentication-Results header are text anyone can write: the addresses are
kept for the record, the rest is never read.
"""

from __future__ import annotations

import email
import re
from dataclasses import dataclass
from email.header import decode_header, make_header
from email.message import Message
from email.parser import HeaderParser
from email.utils import getaddresses, parseaddr

from flufl.bounce import all_failures

from bot.mailer import verp

KINDS = ("bounce", "delayed", "complaint", "unsubscribe", "ignored")
# where the address a mail was delivered to shows (VERP tokens live there)
ENVELOPE_HEADERS = ("Delivered-To", "X-Original-To", "Envelope-To", "X-Envelope-To", "To", "Cc")
_MAILER = re.compile(r"^(mailer-daemon|postmaster|mail-daemon|mailerdaemon|mdaemon)$", re.I)
_BOUNCE_SUBJECT = re.compile(
    r"undeliver|delivery (status|fail|has failed|notification)|returned mail|failure notice|"
    r"mail delivery|could not be delivered|non[- ]?delivery|delayed mail|delivery delayed", re.I)
_MESSAGE_ID_LINE = re.compile(r"^\s*Message-ID:\s*(<[^<>\s]+@[^<>\s]+>)", re.I | re.M)
_SMTP_REPLY = re.compile(r"\b([45]\d\d[ -](?:[45]\.\d{1,3}\.\d{1,3}\b)?.*)$", re.M)
_QMAIL_REASON = re.compile(r"^(\S.*\(#[45]\.\d{1,3}\.\d{1,3}\))\s*$", re.M)
_ARF_COMPLAINT_TYPES = ("abuse", "fraud", "virus", "other")
# "unsubscribe <token>" as bot.mailer.message writes it in the mailto: (a
# token is itsdangerous' three URL-safe base64 fields), "Re: " as some clients add
_UNSUBSCRIBE_SUBJECT = re.compile(
    r"^(?:re:\s*)?unsubscribe\b(?:\s+([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)(?![\w.-]))?", re.I)
MAX_DETAIL = 300


@dataclass(frozen=True)
class Finding:
    """What a mail was taken for, and what it names."""

    kind: str  # one of KINDS
    addresses: tuple[str, ...] = ()  # lower-cased recipient addresses it reports
    message_ids: tuple[str, ...] = ()  # Message-IDs of our original message
    tokens: tuple[str, ...] = ()  # VERP tokens from the addresses it came to
    detail: str = ""  # the diagnostic, or why it was ignored
    unsubscribe_token: str | None = None  # the signed token in an unsubscribe mail's subject
    # a token-less unsubscribe mail's From: address (the mailto: of digests sent before the token):
    # a claim only, used to mail that subscriber the signed link, never to unsubscribe anyone
    claimed_sender: str | None = None


def parse(raw: bytes) -> Message:
    """The mail as the email package's compat32 Message (what flufl.bounce reads)."""
    return email.message_from_bytes(raw)


def header_text(msg: Message, name: str) -> str:
    """A header decoded to one line of text ('' when absent or unreadable)."""
    value = msg.get(name)
    if value is None:
        return ""
    try:
        text = str(make_header(decode_header(str(value))))
    except (ValueError, LookupError, UnicodeError):
        text = str(value)
    return " ".join(text.split())


def classify(msg: Message, verp_base: str | None = None) -> Finding:
    """Sort one mail into a ``Finding``; ``verp_base`` is the bounce address
    whose ``+TOKEN`` forms carry VERP tokens (None: VERP is off)."""
    tokens = _tokens(msg, verp_base)
    if _is_arf(msg):
        return _complaint(msg, verp_base, tokens)
    if _looks_like_bounce(msg, tokens):
        return _bounce(msg, tokens)
    unsubscribe = _UNSUBSCRIBE_SUBJECT.match(header_text(msg, "Subject"))
    token = unsubscribe.group(1) if unsubscribe else None
    # a client may mark its one-press unsubscribe mail automatic; the token decides
    if unsubscribe and (token or not _auto(msg)):
        sender = parseaddr(header_text(msg, "From"))[1].lower() or "no sender"
        detail = "unsubscribe by the List-Unsubscribe mailto:" if token else f"From: {sender}"
        return Finding("unsubscribe", detail=_short(detail), unsubscribe_token=token,
                       claimed_sender=None if token or sender == "no sender" else sender)
    why = "an automatic reply" if _auto(msg) else "not a bounce, complaint or unsubscribe"
    return Finding("ignored", detail=why)


# --- complaints ------------------------------------------------------------------------------

def _is_arf(msg: Message) -> bool:
    if msg.get_content_type() == "multipart/report" and \
            str(msg.get_param("report-type", "")).lower() == "feedback-report":
        return True
    return any(part.get_content_type() == "message/feedback-report" for part in msg.walk())


def _complaint(msg: Message, verp_base: str | None, tokens: tuple[str, ...]) -> Finding:
    report = _feedback_fields(msg)
    feedback_type = (report.get("Feedback-Type") or "abuse").strip().lower()
    originals = _original_headers(msg)
    found = list(tokens)
    addresses: list[str] = []
    for field in ("Original-Rcpt-To", "Removal-Recipient"):
        addresses += [a for _, a in getaddresses(report.get_all(field, []))]
    for original in originals:
        addresses += [a for _, a in getaddresses(original.get_all("To", []))]
        if verp_base:
            for sender in (original.get("Return-Path", ""), report.get("Original-Mail-From", "")):
                token = verp.token_from_address(parseaddr(sender)[1], verp_base)
                if token:
                    found.append(token)
    if verp_base and not originals:
        token = verp.token_from_address(parseaddr(report.get("Original-Mail-From", ""))[1], verp_base)
        if token:
            found.append(token)
    kind = "complaint" if feedback_type in _ARF_COMPLAINT_TYPES else "ignored"
    detail = f"ARF {feedback_type} report" + (f" from {report.get('User-Agent')}"
                                              if report.get("User-Agent") else "")
    return Finding(kind, addresses=_clean(addresses), message_ids=_message_ids(msg, originals),
                   tokens=tuple(dict.fromkeys(found)), detail=_short(detail))


def _feedback_fields(msg: Message) -> Message:
    for part in msg.walk():
        if part.get_content_type() == "message/feedback-report":
            payload = part.get_payload()
            if isinstance(payload, list) and payload and isinstance(payload[0], Message):
                return payload[0]
            return HeaderParser().parsestr(str(payload or ""))
    return Message()


# --- bounces ---------------------------------------------------------------------------------

def _looks_like_bounce(msg: Message, tokens: tuple[str, ...]) -> bool:
    """Mail from a mail system: the null sender, MAILER-DAEMON or postmaster, a
    delivery-status report, Exim's X-Failed-Recipients, or a bounce subject on
    an automatic mail or one sent to a VERP address."""
    if msg.get("Return-Path") is not None and not parseaddr(str(msg["Return-Path"]))[1]:
        return True  # the null sender <>: only mail systems use it
    local = parseaddr(header_text(msg, "From"))[1].split("@", 1)[0]
    if _MAILER.match(local):
        return True
    if msg.get_content_type() == "multipart/report" and \
            str(msg.get_param("report-type", "")).lower() == "delivery-status":
        return True
    if "X-Failed-Recipients" in msg:
        return True
    subject = header_text(msg, "Subject")
    return bool(_BOUNCE_SUBJECT.search(subject) and (tokens or _auto(msg)))


def _bounce(msg: Message, tokens: tuple[str, ...]) -> Finding:
    temporary, permanent = all_failures(msg)
    originals = _original_headers(msg)
    message_ids = _message_ids(msg, originals)
    if permanent:
        kind, addresses = "bounce", permanent
    elif temporary:
        kind, addresses = "delayed", temporary
    else:
        action = _dsn_actions(msg)
        why = (f"a delivery report saying {action}" if action and "failed" not in action
               else "a bounce we could not read")
        return Finding("ignored", message_ids=message_ids, tokens=tokens, detail=why)
    decoded = [a.decode("ascii", "replace") for a in addresses]
    return Finding(kind, addresses=_clean(decoded), message_ids=message_ids, tokens=tokens,
                   detail=_short(_diagnostic(msg)))


def _dsn_actions(msg: Message) -> str:
    actions: list[str] = []
    for part in msg.walk():
        if part.get_content_type() == "message/delivery-status" and part.is_multipart():
            for block in part.get_payload():
                if isinstance(block, Message) and block.get("Action"):
                    actions.append(str(block["Action"]).strip().lower())
    return ", ".join(dict.fromkeys(actions))


def _diagnostic(msg: Message) -> str:
    """Why it failed, in the reporting server's words: the DSN's Status and
    Diagnostic-Code, else the first SMTP reply quoted in the text."""
    for part in msg.walk():
        if part.get_content_type() == "message/delivery-status" and part.is_multipart():
            for block in part.get_payload():
                if not isinstance(block, Message):
                    continue
                code = " ".join(str(block.get("Diagnostic-Code", "")).split())
                status = str(block.get("Status", "")).strip()
                if code or (status and block.get("Action")):
                    return " ".join(x for x in (status, code) if x)
    for part in msg.walk():
        if part.get_content_type() == "text/plain":
            text = _text(part)
            match = _SMTP_REPLY.search(text) or _QMAIL_REASON.search(text)
            if match:
                return match.group(1)
    return header_text(msg, "Subject")


# --- helpers ---------------------------------------------------------------------------------

def _tokens(msg: Message, verp_base: str | None) -> tuple[str, ...]:
    if not verp_base:
        return ()
    found = []
    for name in ENVELOPE_HEADERS:
        for _, address in getaddresses(msg.get_all(name, [])):
            token = verp.token_from_address(address, verp_base)
            if token:
                found.append(token)
    return tuple(dict.fromkeys(found))


def _original_headers(msg: Message) -> list[Message]:
    """The headers of the message a report is about, where it returns them."""
    found: list[Message] = []
    for part in msg.walk():
        ctype = part.get_content_type()
        if ctype == "message/rfc822":
            payload = part.get_payload()
            if isinstance(payload, list) and payload and isinstance(payload[0], Message):
                found.append(payload[0])
        elif ctype in ("text/rfc822-headers", "message/rfc822-headers"):
            found.append(HeaderParser().parsestr(_text(part)))
    return found


def _message_ids(msg: Message, originals: list[Message]) -> tuple[str, ...]:
    ids = [str(o.get("Message-ID", "")).strip() for o in originals]
    # qmail and classic Exim return the original inline, after a marker line
    own = str(msg.get("Message-ID", "")).strip()
    for part in msg.walk():
        if part.get_content_type() == "text/plain":
            ids += [m for m in _MESSAGE_ID_LINE.findall(_text(part)) if m != own]
    return tuple(dict.fromkeys(i for i in ids if i.startswith("<") and "@" in i))


def _text(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return str(part.get_payload() or "")
    charset = part.get_content_charset() or "utf-8"
    try:
        return payload.decode(charset, "replace")
    except LookupError:
        return payload.decode("utf-8", "replace")


def _auto(msg: Message) -> bool:
    auto = str(msg.get("Auto-Submitted", "no")).strip().lower()
    return (auto not in ("", "no") or "X-Autoreply" in msg or "X-Autorespond" in msg
            or str(msg.get("Precedence", "")).lower() in ("auto_reply", "bulk", "junk"))


def _clean(addresses: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a.strip().strip("<>").lower() for a in addresses if "@" in a))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"
