/* global process, console, URL */
// The agent of the README's walkthrough: it waits for mail, drafts a reply, and waits until a person
// has approved it and the reply has left. Run it from the checkout, which has the MCP SDK installed:
//   AGENT_TOKEN=alc_… node docs/examples/walkthrough-agent.mjs
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = new URL(process.env.ALCARTA_URL ?? 'http://localhost:3000/mcp');
const client = new Client({ name: 'walkthrough-agent', version: '1.0.0' });
await client.connect(
  new StreamableHTTPClientTransport(url, {
    requestInit: { headers: { Authorization: `Bearer ${process.env.AGENT_TOKEN}` } },
  }),
);

// Waits longer than a minute ask for progress: each progress notification resets the client's 60 s timer.
const longWait = { onprogress: () => {}, resetTimeoutOnProgress: true };
const call = async (name, args, options) =>
  (await client.callTool({ name, arguments: args }, undefined, options)).structuredContent;

const {
  mailboxes: [mailbox],
} = await call('list_mailboxes', {});
console.log(`waiting for mail to ${mailbox.address} …`);
const inbox = await call(
  'email_await',
  { event: { type: 'message_received', mailbox_id: mailbox.mailbox_id }, timeout_seconds: 300 },
  longWait,
);
if (!inbox.matched) {
  console.log('no mail within 5 minutes; run me again');
  process.exit(1);
}
const [mail] = inbox.events;
console.log(`mail from ${mail.from}: "${mail.subject}"`);

const request = await call('send_email', {
  mailbox_id: mailbox.mailbox_id,
  to: [mail.from],
  subject: `Re: ${mail.subject}`,
  text: 'Thanks for your message. We are looking into it.',
  in_reply_to_message_id: mail.message_id,
});
console.log(`reply drafted: ${request.request_id} is ${request.state}, waiting for a person to decide …`);

// Wake when the reply has left (or will never leave): rejected, expired or cancelled end the wait too.
const decided = await call(
  'monitor_approval',
  {
    request_id: request.request_id,
    delivery_states: ['sent', 'failed', 'bounced', 'not_configured'],
    timeout_seconds: 3600,
  },
  longWait,
);
console.log(JSON.stringify(decided.requests[0]));
await client.close();
