"""A recording handler for Debian's aiosmtpd, the real SMTP server the outbox tests use as relay.

    /usr/bin/python3 -m aiosmtpd -n -l 127.0.0.1:PORT -c smtp_relay_handler.RecordingHandler DIR

Every accepted message is written to DIR as <id>.eml (the DATA bytes) and <id>.json (the
envelope), the JSON last and by rename, so a reader never sees half a message. The test steers it
through the file DIR/mode, read at each command:
  accept        take everything (the default)
  refuse-rcpt   answer RCPT TO with 550 5.1.1 (a permanent failure)
  tempfail-rcpt answer RCPT TO with 451 4.3.0 (a temporary failure)
  hold          keep DATA unanswered (marker files DIR/held-*) until the mode changes; a client
                that disconnects meanwhile has its DATA dropped, as a real server would
"""
import asyncio
import json
import os
import time
import uuid


class RecordingHandler:
    def __init__(self, directory):
        self.directory = directory

    @classmethod
    def from_cli(cls, parser, *args):
        if len(args) != 1:
            parser.error('RecordingHandler takes one argument: the directory to record into')
        return cls(args[0])

    def mode(self):
        try:
            with open(os.path.join(self.directory, 'mode')) as f:
                return f.read().strip() or 'accept'
        except FileNotFoundError:
            return 'accept'

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        mode = self.mode()
        if mode == 'refuse-rcpt':
            return '550 5.1.1 <%s>: Recipient address rejected: User unknown' % address
        if mode == 'tempfail-rcpt':
            return '451 4.3.0 <%s>: Temporary lookup failure' % address
        envelope.rcpt_tos.append(address)
        return '250 2.1.5 OK'

    async def handle_DATA(self, server, session, envelope):
        ident = '%d-%s' % (time.time_ns(), uuid.uuid4().hex[:8])
        if self.mode() == 'hold':
            marker = os.path.join(self.directory, 'held-' + ident)
            with open(marker, 'w') as f:
                f.write(envelope.mail_from or '')
            try:
                while self.mode() == 'hold':
                    await asyncio.sleep(0.05)
            finally:
                os.remove(marker)
        with open(os.path.join(self.directory, ident + '.eml'), 'wb') as f:
            f.write(envelope.original_content or envelope.content)
        record = {'id': ident, 'mail_from': envelope.mail_from, 'rcpt_tos': envelope.rcpt_tos}
        tmp = os.path.join(self.directory, ident + '.json.tmp')
        with open(tmp, 'w') as f:
            json.dump(record, f)
        os.rename(tmp, os.path.join(self.directory, ident + '.json'))
        return '250 2.0.0 Ok: queued as %s' % ident
