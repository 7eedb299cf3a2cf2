"""The report's mail over TLS, against a real SMTP server on loopback with a self-signed certificate the
client is told to trust (``SSL_CERT_FILE``, which OpenSSL's default verify paths read): STARTTLS and
TLS from the first byte, the password sent only inside TLS; a certificate the client does not trust
is one line naming the URL, and no password leaves."""

from __future__ import annotations

import email
import email.policy
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.smtp_sink import SmtpSink

from tritonwatch.reports.deliver import DeliveryError, Smtp, message, send_mail

pytestmark = pytest.mark.needs("openssl")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("smtp-tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        + ["-keyout", str(d / "server.key"), "-out", str(d / "server.crt"), "-days", "2"]
        + ["-subj", "/CN=tritonwatch-smtp-test", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return d


def _sink(certs: Path, implicit: bool) -> SmtpSink:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(certs / "server.crt", certs / "server.key")
    return SmtpSink(credentials=("bot", "pw-over-tls"), tls=ctx, implicit=implicit).start()


@pytest.fixture(params=[False, True], ids=["starttls", "smtps"])
def sink(request: pytest.FixtureRequest, certs: Path) -> Iterator[SmtpSink]:
    s = _sink(certs, request.param)
    try:
        yield s
    finally:
        s.stop()


def _smtp(sink: SmtpSink) -> Smtp:
    scheme = sink.url.partition("://")[0]
    return Smtp(sink.url, scheme, "127.0.0.1", sink.port, "bot", "pw-over-tls")


def _mail() -> email.message.EmailMessage:
    return message(
        "Triton capacity report 2026-W49", "r@example.com", ["a@example.com"], "text", "<p>x</p>", []
    )


def test_the_mail_goes_over_tls_and_the_password_only_inside_it(
    sink: SmtpSink, certs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(certs / "server.crt"))
    send_mail(_smtp(sink), _mail())
    assert sink.logins == [("bot", "pw-over-tls")] and sink.logins_over_tls == [True]
    (mail,) = sink.mails
    parsed = email.message_from_bytes(mail.data, policy=email.policy.default)
    assert parsed["Subject"] == "Triton capacity report 2026-W49" and mail.user == "bot"


def test_an_untrusted_certificate_stops_the_mail_before_the_password(sink: SmtpSink) -> None:
    with pytest.raises(DeliveryError) as err:
        send_mail(_smtp(sink), _mail())
    text = str(err.value)
    assert text.startswith(f"--smtp {sink.url}: mail not sent (SSLCertVerificationError") and "\n" not in text
    assert "pw-over-tls" not in text and repr(_smtp(sink)).count("pw-over-tls") == 0
    assert sink.logins == [] and sink.mails == []
