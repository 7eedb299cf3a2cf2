"""A real SMTP server on loopback that keeps what it is sent (Python 3.12 has no ``smtpd``).

It speaks the part of RFC 5321 a client sending one mail uses: the greeting, EHLO/HELO (advertising
``AUTH PLAIN`` and ``8BITMIME``), ``AUTH PLAIN`` with its initial response (RFC 4954), MAIL, RCPT,
DATA (dot-unstuffed), RSET, NOOP, QUIT. With ``credentials`` set, a mail is accepted only after a
login with them (535 otherwise). With ``tls`` (a server context), it speaks TLS from the first byte
(``implicit``, smtps) or offers ``STARTTLS`` (RFC 3207); ``logins`` records whether each login came
over TLS.
"""

from __future__ import annotations

import base64
import socketserver
import ssl
import threading
from dataclasses import dataclass, field


@dataclass
class Mail:
    sender: str
    recipients: list[str]
    data: bytes  # the message as sent, line ends CRLF
    user: str | None  # who logged in (None: no AUTH)


@dataclass
class SmtpSink:
    credentials: tuple[str, str] | None = None
    mails: list[Mail] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    tls: ssl.SSLContext | None = None
    implicit: bool = False  # TLS from the first byte (smtps) rather than STARTTLS
    logins_over_tls: list[bool] = field(default_factory=list)
    _server: socketserver.ThreadingTCPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        scheme = "smtp" if self.tls is None else "smtps" if self.implicit else "smtp+starttls"
        return f"{scheme}://127.0.0.1:{self.port}"

    def start(self) -> SmtpSink:
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def setup(self) -> None:
                if sink.tls is not None and sink.implicit:
                    self.request = sink.tls.wrap_socket(self.request, server_side=True)
                super().setup()

            def starttls(self) -> None:
                assert sink.tls is not None
                self.wfile.flush()
                self.connection = self.request = sink.tls.wrap_socket(self.request, server_side=True)
                self.rfile = self.connection.makefile("rb")
                self.wfile = self.connection.makefile("wb")

            def reply(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")
                self.wfile.flush()

            def handle(self) -> None:
                self.reply("220 sink ESMTP ready")
                user: str | None = None
                sender, rcpts = "", list[str]()
                while True:
                    raw = self.rfile.readline(4096)
                    if not raw:
                        return
                    line = raw.decode("ascii", "replace").rstrip("\r\n")
                    verb, _, rest = line.partition(" ")
                    verb = verb.upper()
                    over_tls = isinstance(self.request, ssl.SSLSocket)
                    if verb == "EHLO":
                        offer = "250-STARTTLS\r\n" if sink.tls is not None and not over_tls else ""
                        self.reply(f"250-sink\r\n{offer}250-AUTH PLAIN\r\n250 8BITMIME")
                    elif verb == "STARTTLS" and sink.tls is not None and not over_tls:
                        self.reply("220 2.0.0 ready to start TLS")
                        self.starttls()
                    elif verb == "HELO":
                        self.reply("250 sink")
                    elif verb == "AUTH":
                        mech, _, initial = rest.partition(" ")
                        if mech.upper() != "PLAIN" or not initial:
                            self.reply("504 only AUTH PLAIN with an initial response")
                            continue
                        _, name, password = base64.b64decode(initial).decode().split("\0")
                        sink.logins.append((name, password))
                        sink.logins_over_tls.append(over_tls)
                        if sink.credentials is not None and (name, password) != sink.credentials:
                            self.reply("535 5.7.8 authentication failed")
                            continue
                        user = name
                        self.reply("235 2.7.0 authenticated")
                    elif verb == "MAIL":
                        if sink.credentials is not None and user is None:
                            self.reply("530 5.7.0 authentication required")
                            continue
                        sender, rcpts = rest.partition(":")[2].split()[0].strip("<>"), []
                        self.reply("250 ok")
                    elif verb == "RCPT":
                        rcpts.append(rest.partition(":")[2].strip().strip("<>"))
                        self.reply("250 ok")
                    elif verb == "DATA":
                        self.reply("354 end with <CRLF>.<CRLF>")
                        lines = []
                        while (data := self.rfile.readline()) not in (b".\r\n", b""):
                            lines.append(data[1:] if data.startswith(b".") else data)
                        sink.mails.append(Mail(sender, rcpts, b"".join(lines), user))
                        self.reply("250 queued")
                    elif verb in ("RSET", "NOOP"):
                        self.reply("250 ok")
                    elif verb == "QUIT":
                        self.reply("221 bye")
                        return
                    else:
                        self.reply("502 not implemented")

        class Server(socketserver.ThreadingTCPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that refuses the certificate ends the handshake: not the test's failure

        server = Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
