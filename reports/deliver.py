"""Deliver a written report: by email (``--mail-to``, ``--mail-from``, ``--smtp``) and to a chat webhook.

The mail has a plain-text part (report.md) and an HTML part (report.html with its charts attached
inline, ``cid:`` images, since most mail clients block ``data:`` URIs), the ISO week in the subject.
``--smtp`` is ``smtp://host[:port]`` (plain, port 25), ``smtp+starttls://host[:port]`` (STARTTLS
required, port 587) or ``smtps://host[:port]`` (TLS from the first byte, port 465). Credentials never
come from the command line: ``TRITONWATCH_SMTP_USER`` and ``TRITONWATCH_SMTP_PASSWORD``, or
``--smtp-credentials FILE`` (the user on the first line, the password on the second: a mounted
Secret); a URL carrying them is refused, and they are never sent over a plain connection to anything
but loopback.

The webhook gets ``{"text": ...}`` (what Slack, Mattermost and Teams incoming webhooks accept): the
week, the nearest saturation, the new findings, and where the full report is.

Every flag is checked before Prometheus is queried (``parse``): a bad address or URL is a UsageError
naming the flag. A delivery that fails after the report is written raises ``DeliveryError``, one line
naming the URL; the caller has already written the report.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import smtplib
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from urllib.parse import urlsplit

from tritonwatch.errors import TritonwatchError, UsageError

SCHEMES = {"smtp": 25, "smtp+starttls": 587, "smtps": 465}
USER_ENV, PASSWORD_ENV = "TRITONWATCH_SMTP_USER", "TRITONWATCH_SMTP_PASSWORD"
TIMEOUT_S = 30.0
# A plain address: no display name, no comment, nothing a header could be split on.
_ADDRESS = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?$")


class DeliveryError(TritonwatchError):
    """A delivery that failed; the report itself was written."""


@dataclass(frozen=True)
class Smtp:
    url: str  # as given, without credentials: safe to print
    scheme: str
    host: str
    port: int
    user: str | None = None
    password: str | None = None

    def __repr__(self) -> str:  # never the password, in a traceback or a log
        return f"Smtp({self.url!r}, user={self.user!r})"


@dataclass(frozen=True)
class Delivery:
    mail_to: tuple[str, ...] = ()
    mail_from: str = ""
    smtp: Smtp | None = None
    webhook: str | None = None
    report_url: str | None = None  # where readers open the archive (the webhook links the week there)

    def __bool__(self) -> bool:
        return bool(self.mail_to or self.webhook)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mail-to", metavar="ADDR[,ADDR...]", help="mail the report to these addresses")
    parser.add_argument("--mail-from", metavar="ADDR", help="the mail's sender (with --mail-to)")
    parser.add_argument(
        "--smtp",
        metavar="URL",
        help="mail server: smtp://host[:port], smtp+starttls://host[:port] or smtps://host[:port]; user "
        f"and password from {USER_ENV} and {PASSWORD_ENV} or --smtp-credentials, never in the URL",
    )
    parser.add_argument(
        "--smtp-credentials", metavar="FILE", help="file with the SMTP user (line 1) and password (line 2)"
    )
    parser.add_argument(
        "--webhook", metavar="URL", help='post a summary as JSON {"text": ...} (Slack, Mattermost, Teams)'
    )
    parser.add_argument(
        "--report-url",
        metavar="URL",
        help="where readers open the archive (e.g. https://reports.example/capacity): the webhook links "
        "URL/<week>/report.html instead of naming the file",
    )


def _address(text: str, flag: str) -> str:
    a = text.strip()
    if not _ADDRESS.match(a) or len(a) > 254:
        raise UsageError(f"{flag}: {text!r:.80} is not a mail address (e.g. planner@example.com)")
    return a


def _http_url(text: str, flag: str) -> str:
    url = urlsplit(text)
    if url.scheme not in ("http", "https") or not url.hostname or any(c.isspace() for c in text):
        raise UsageError(f"{flag}: {text!r:.120} is not an http(s) URL")
    return text


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _credentials(path: str | None) -> tuple[str | None, str | None]:
    if path:
        try:
            lines = Path(path).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(
                f"--smtp-credentials {path}: cannot read it ({exc.__class__.__name__})"
            ) from None
        if len(lines) < 2 or not lines[0].strip():
            raise UsageError(
                f"--smtp-credentials {path}: needs the user on line 1 and the password on line 2"
            )
        return lines[0].strip(), lines[1]
    user, password = os.environ.get(USER_ENV) or None, os.environ.get(PASSWORD_ENV) or None
    if (user is None) != (password is None):
        raise UsageError(f"{USER_ENV} and {PASSWORD_ENV}: set both or neither")
    return user, password


def _smtp(text: str, credentials: str | None) -> Smtp:
    try:
        url = urlsplit(text)
        port = url.port
    except ValueError:
        raise UsageError(f"--smtp: {text!r:.120} is not a URL") from None
    if url.username is not None or url.password is not None:
        # Not even echoed: the flag's value may hold a password.
        raise UsageError(f"--smtp: user and password do not belong in the URL; use {USER_ENV}/{PASSWORD_ENV}")
    if url.scheme not in SCHEMES or not url.hostname or url.path not in ("", "/") or url.query:
        raise UsageError(
            f"--smtp: {text!r:.120} is not smtp://host[:port], smtp+starttls://host[:port] or smtps://host[:port]"
        )
    user, password = _credentials(credentials)
    if user is not None and url.scheme == "smtp" and not _loopback(url.hostname):
        raise UsageError(
            f"--smtp: {text}: refusing to send the password unencrypted; use smtp+starttls:// or smtps://"
        )
    return Smtp(text, url.scheme, url.hostname, port or SCHEMES[url.scheme], user, password)


def parse(args: argparse.Namespace) -> Delivery:
    """The delivery the flags ask for, every value checked (UsageError naming the flag)."""
    to = tuple(_address(a, "--mail-to") for a in (args.mail_to or "").split(",") if a.strip())
    if args.mail_to and not to:
        raise UsageError("--mail-to: no address given")
    smtp = _smtp(args.smtp, args.smtp_credentials) if args.smtp else None
    if to and not (args.mail_from and smtp):
        raise UsageError("--mail-to: needs --mail-from and --smtp")
    if (args.mail_from or smtp) and not to:
        raise UsageError(f"{'--mail-from' if args.mail_from else '--smtp'}: needs --mail-to")
    sender = _address(args.mail_from, "--mail-from") if args.mail_from else ""
    webhook = _http_url(args.webhook, "--webhook") if args.webhook else None
    report_url = _http_url(args.report_url, "--report-url").rstrip("/") if args.report_url else None
    return Delivery(to, sender, smtp, webhook, report_url)


def message(
    subject: str, sender: str, to: Sequence[str], text: str, page: str, images: Sequence[tuple[str, bytes]]
) -> EmailMessage:
    """multipart/alternative: the text, then multipart/related: the HTML and its images by Content-ID
    (``images``: (cid without brackets, PNG bytes), as the page names them ``cid:...``)."""
    msg = EmailMessage()
    # A label value may hold a line break; a header may not (it would end the header block).
    msg["Subject"], msg["From"], msg["To"] = " ".join(subject.split()), sender, ", ".join(to)
    msg["Date"] = formatdate(usegmt=True)
    msg["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2])
    msg.set_content(text)
    msg.add_alternative(page, subtype="html")
    html_part = msg.get_body(preferencelist=("html",))
    assert html_part is not None  # just added
    for cid, png in images:
        html_part.add_related(png, "image", "png", cid=f"<{cid}>", filename=f"{cid.partition('@')[0]}.png")
    return msg


def send_mail(smtp: Smtp, msg: EmailMessage) -> None:
    """Send it; DeliveryError naming the URL (never the credentials) when that fails."""
    try:
        context = ssl.create_default_context()
        if smtp.scheme == "smtps":
            client: smtplib.SMTP = smtplib.SMTP_SSL(smtp.host, smtp.port, timeout=TIMEOUT_S, context=context)
        else:
            client = smtplib.SMTP(smtp.host, smtp.port, timeout=TIMEOUT_S)
        with client:
            client.ehlo()
            if smtp.scheme == "smtp+starttls":
                client.starttls(context=context)
                client.ehlo()
            if smtp.user is not None and smtp.password is not None:
                client.login(smtp.user, smtp.password)
            refused = client.send_message(msg)
        if refused:
            raise DeliveryError(f"--smtp {smtp.url}: refused recipients {', '.join(sorted(refused))}")
    except smtplib.SMTPAuthenticationError as exc:
        raise DeliveryError(f"--smtp {smtp.url}: login refused ({exc.smtp_code})") from None
    except smtplib.SMTPResponseException as exc:
        reason = (
            exc.smtp_error.decode(errors="replace") if isinstance(exc.smtp_error, bytes) else exc.smtp_error
        )
        raise DeliveryError(
            f"--smtp {smtp.url}: {exc.smtp_code} {reason.splitlines()[0] if reason else ''}"
        ) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryError(f"--smtp {smtp.url}: mail not sent ({_reason(exc)})") from None


def post_webhook(url: str, text: str) -> None:
    import requests

    try:
        r = requests.post(url, json={"text": text}, timeout=TIMEOUT_S)
    except requests.RequestException as exc:
        raise DeliveryError(f"--webhook {url}: not delivered ({_reason(exc)})") from None
    if not 200 <= r.status_code < 300:
        raise DeliveryError(f"--webhook {url}: not delivered (HTTP {r.status_code})")


def _reason(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{exc.__class__.__name__}: {text}"[:200] if text else exc.__class__.__name__
