"""A real SMTP server on loopback (aiosmtpd) that keeps what it is sent, for the bot's mail tests."""

from __future__ import annotations

import email
import socket
from email import policy


class SmtpSink:
    def __init__(self):
        from aiosmtpd.controller import Controller

        self.messages: list[email.message.EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        sink = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                sink.messages.append(email.message_from_bytes(envelope.original_content, policy=policy.default))
                sink.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
                return "250 OK"

        # aiosmtpd connects to its own port to see that it is up: it needs the number before starting.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)

    def __enter__(self) -> SmtpSink:
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()
