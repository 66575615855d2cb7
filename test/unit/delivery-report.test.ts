import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseRfc822 } from '#app/mail/rfc822-parser.js';

/** A delivery status notification with `returned` as its third part (type and content). */
function dsn(options: {
  reportType?: string;
  perMessage?: string[];
  recipients?: string[][];
  returned?: { type: string; lines: string[] };
  extraHeaders?: string[];
}): Buffer {
  const {
    reportType = 'delivery-status',
    perMessage = ['Reporting-MTA: dns; relay.example'],
    recipients = [['Final-Recipient: rfc822; nobody@example.org', 'Action: failed', 'Status: 5.1.1']],
    returned,
    extraHeaders = [],
  } = options;
  const lines = [
    'From: MAILER-DAEMON@relay.example',
    'To: agent@agents.example',
    'Subject: Undelivered Mail Returned to Sender',
    'Message-ID: <report-1@relay.example>',
    ...extraHeaders,
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type=${reportType}; boundary="XX"`,
    '',
    '--XX',
    'Content-Type: text/plain',
    '',
    'The message could not be delivered.',
    '',
    '--XX',
    'Content-Type: message/delivery-status',
    '',
    ...perMessage,
    '',
    ...recipients.flatMap((r) => [...r, '']),
    ...(returned ? ['--XX', `Content-Type: ${returned.type}`, '', ...returned.lines, ''] : []),
    '--XX--',
    '',
  ];
  return Buffer.from(lines.join('\r\n'));
}

const returnedHeaders = (id: string) => ({
  type: 'text/rfc822-headers',
  lines: ['From: agent@agents.example', 'To: nobody@example.org', 'Subject: Hi', `Message-ID: ${id}`],
});

describe('delivery status notifications in inbound mail', () => {
  it('reads the original Message-ID from the returned headers and each recipient’s action', async () => {
    const parsed = await parseRfc822(
      dsn({
        returned: returnedHeaders('<msg_1@agents.example>'),
        recipients: [
          [
            'Final-Recipient: rfc822; nobody@example.org',
            'Action: Failed',
            'Status: 5.1.1',
            'Diagnostic-Code: smtp; 550 5.1.1',
            '  User unknown',
          ],
          ['Final-Recipient: rfc822; later@example.org', 'Action: delayed', 'Status: 4.4.1'],
        ],
      }),
    );
    assert.deepEqual(parsed.deliveryReport, {
      originalMessageId: '<msg_1@agents.example>',
      recipients: [
        {
          recipient: 'nobody@example.org',
          action: 'failed',
          status: '5.1.1',
          diagnostic: 'smtp; 550 5.1.1 User unknown',
        },
        { recipient: 'later@example.org', action: 'delayed', status: '4.4.1', diagnostic: null },
      ],
    });
    // The status fields stay readable in the stored text.
    assert.match(parsed.text, /The message could not be delivered\.[\s\S]*Action: Failed/);
  });

  it('reads the Message-ID of a returned message/rfc822 part (headers only, not its body)', async () => {
    const parsed = await parseRfc822(
      dsn({
        returned: {
          type: 'message/rfc822',
          lines: ['From: agent@agents.example', 'Message-ID: <msg_2@agents.example>', '', 'Message-ID: <not@this>'],
        },
      }),
    );
    assert.equal(parsed.deliveryReport?.originalMessageId, '<msg_2@agents.example>');
  });

  it('falls back to the envelope id, then to the report’s In-Reply-To', async () => {
    const byEnvelope = await parseRfc822(
      dsn({ perMessage: ['Reporting-MTA: dns; relay.example', 'Original-Envelope-Id: msg_3@agents.example'] }),
    );
    assert.equal(byEnvelope.deliveryReport?.originalMessageId, '<msg_3@agents.example>');
    const byReply = await parseRfc822(dsn({ extraHeaders: ['In-Reply-To: <msg_4@agents.example>'] }));
    assert.equal(byReply.deliveryReport?.originalMessageId, '<msg_4@agents.example>');
    const none = await parseRfc822(dsn({ perMessage: ['Original-Envelope-Id: 12345'] }));
    assert.equal(none.deliveryReport?.originalMessageId, null);
  });

  it('ignores other reports and ordinary mail', async () => {
    const receipt = await parseRfc822(dsn({ reportType: 'disposition-notification' }));
    assert.equal(receipt.deliveryReport, undefined);
    const plain = await parseRfc822(Buffer.from('From: a@example.org\r\nSubject: hi\r\n\r\nAction: failed\r\n'));
    assert.equal(plain.deliveryReport, undefined);
    assert.equal(plain.text.trim(), 'Action: failed');
  });

  it('takes no Message-ID with a NUL or spaces, which could not name a stored message', async () => {
    const parsed = await parseRfc822(dsn({ returned: returnedHeaders('<bad\u0000id@agents.example>') }));
    assert.equal(parsed.deliveryReport?.originalMessageId, null);
    const spaced = await parseRfc822(dsn({ returned: returnedHeaders('<bad id@agents.example>') }));
    assert.equal(spaced.deliveryReport?.originalMessageId, null);
  });

  it('reads at most 100 recipients of a hostile report', async () => {
    const many = Array.from({ length: 500 }, (_, i) => [
      `Final-Recipient: rfc822; r${i}@example.org`,
      'Action: failed',
    ]);
    const parsed = await parseRfc822(dsn({ recipients: many, returned: returnedHeaders('<m@agents.example>') }));
    assert.equal(parsed.deliveryReport?.recipients.length, 100);
  });
});
