import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { callOk } from './mcp';

/** The subjects of every message of the mailbox, in mailbox order, read page by page through list_messages. */
export async function listedSubjects(agent: Client, mailboxId: string): Promise<string[]> {
  const subjects: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await callOk(agent, 'list_messages', {
      mailbox_id: mailboxId,
      limit: 100,
      ...(cursor && { since_cursor: cursor }),
    });
    const messages = page.messages as Array<{ subject: string }>;
    subjects.push(...messages.map((m) => m.subject));
    if (messages.length === 0 || !page.next_cursor || page.next_cursor === cursor) return subjects;
    cursor = page.next_cursor as string;
  }
}

/** How often each of `subjects` occurs in `listed` (so a test can say "exactly once" of every one). */
export function occurrences(listed: readonly string[], subjects: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = Object.fromEntries(subjects.map((s) => [s, 0]));
  for (const s of listed) if (s in counts) counts[s]++;
  return counts;
}

/** Each of `subjects` once: the expected value of `occurrences`. */
export function once(subjects: readonly string[]): Record<string, number> {
  return Object.fromEntries(subjects.map((s) => [s, 1]));
}
