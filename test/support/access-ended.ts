import assert from 'node:assert/strict';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { OpenedSocket } from './wait-socket';

/** docs/operators.md "Limits and hardening": what is left running for a credential ends within this long of its revocation. */
export const AT_ONCE_MS = 1_000;

/** The tool error a wait ended with: `isError` and `{error, reason, message}` mirrored as text. */
export function toolError(result: CallToolResult): { error: string; reason: string; message: string } {
  assert.equal(result.isError, true, `expected a tool error, got ${JSON.stringify(result.structuredContent)}`);
  assert.deepEqual(JSON.parse((result.content[0] as { text: string }).text), result.structuredContent);
  return result.structuredContent as { error: string; reason: string; message: string };
}

/** A parked call that the revocation at `revokedAt` ended with the unauthorized tool error, at once. */
export async function assertEndedAtOnce(
  pending: Promise<CallToolResult>,
  revokedAt: number,
  reason: string,
): Promise<void> {
  const body = toolError(await pending);
  const elapsed = Date.now() - revokedAt;
  assert.deepEqual({ error: body.error, reason: body.reason }, { error: 'unauthorized', reason });
  assert.ok(elapsed <= AT_ONCE_MS, `ended ${elapsed} ms after the revocation`);
}

/** A socket ended by its credential: ready, then the error frame (and nothing else), then close 1008. */
export async function assertSocketEnded(socket: OpenedSocket, waitId: string, reason: string): Promise<void> {
  const { code } = await socket.closed;
  assert.equal(code, 1008, 'policy violation');
  assert.equal(socket.frames.length, 2, `ready and the error only: ${JSON.stringify(socket.frames)}`);
  assert.deepEqual(socket.frames[0], { type: 'ready', wait_id: waitId });
  const { message, ...frame } = socket.frames[1];
  assert.deepEqual(frame, { type: 'error', error: 'unauthorized', reason });
  assert.equal(typeof message, 'string');
}
