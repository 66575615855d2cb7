/** Who the server says it is, at every revision. */
export const SERVER_INFO = { name: 'alcarta', title: 'Alcarta', version: '0.1.0' };

const INSTRUCTIONS_BASE =
  'Alcarta gives you mailboxes and human approvals. Use list_mailboxes to find your mailboxes, ' +
  'list_messages/get_message to read mail, send_email to send (a person approves first) and request_approval ' +
  'to ask a person before acting. Never poll in a loop: wait for new mail or decisions with email_await, ' +
  'monitor_inbox or monitor_approval, and resume with the next_cursor you were given. For waits longer than ' +
  'your request timeout, ';

/** The `instructions` of the server at the 2025 revisions (`initialize`). */
export const SERVER_INSTRUCTIONS = `${INSTRUCTIONS_BASE}run them as tasks and block on tasks/result.`;

/** At 2026-07-28 tasks are the Tasks extension: no tasks/result, the result comes with tasks/get. */
export const REVISION_2026_07_28_INSTRUCTIONS =
  `${INSTRUCTIONS_BASE}declare the io.modelcontextprotocol/tasks extension: they then run as tasks, ` +
  'and tasks/get returns the result once the task is completed.';
