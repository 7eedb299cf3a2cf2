"""A real SMTP server on loopback that keeps what it is sent (Python 3.12 has no ``smtpd``).

It speaks the part of RFC 5321 a client sending one mail uses: the greeting, EHLO/HELO (advertising
``AUTH PLAIN`` and ``8BITMIME``), ``AUTH PLAIN`` with its initial response (RFC 4954), MAIL, RCPT,
DATA (dot-unstuffed), RSET, NOOP, QUIT. With ``credentials`` set, a mail is accepted only after a
login with them (535 otherwise).
"""

from __future__ import annotations

import base64
import socketserver
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
    _server: socketserver.ThreadingTCPServer | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def start(self) -> SmtpSink:
        sink = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, line: str) -> None:
                self.wfile.write(line.encode() + b"\r\n")
                self.wfile.flush()

            def handle(self) -> None:
                self.reply("220 sink ESMTP ready")
                user: str | None = None
                sender, rcpts = "", []
                while True:
                    raw = self.rfile.readline(4096)
                    if not raw:
                        return
                    line = raw.decode("ascii", "replace").rstrip("\r\n")
                    verb, _, rest = line.partition(" ")
                    verb = verb.upper()
                    if verb == "EHLO":
                        self.reply("250-sink\r\n250-AUTH PLAIN\r\n250 8BITMIME")
                    elif verb == "HELO":
                        self.reply("250 sink")
                    elif verb == "AUTH":
                        mech, _, initial = rest.partition(" ")
                        if mech.upper() != "PLAIN" or not initial:
                            self.reply("504 only AUTH PLAIN with an initial response")
                            continue
                        _, name, password = base64.b64decode(initial).decode().split("\0")
                        sink.logins.append((name, password))
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

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
