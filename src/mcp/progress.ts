import type { ProgressToken } from '@modelcontextprotocol/sdk/types.js';
import { ToolContext } from './tool-definition';

/** A `notifications/progress` message, without the JSON-RPC envelope. */
export interface ProgressNotification {
  method: 'notifications/progress';
  params: { progressToken: ProgressToken; progress: number; message: string };
}

/**
 * What sends progress of a request that carried `progressToken` (in `params._meta`), through
 * `send`; undefined when it carried none (the client asked for no progress).
 */
export function progressNotifier(
  progressToken: ProgressToken | undefined,
  send: (notification: ProgressNotification) => Promise<void>,
): ToolContext['progress'] {
  if (progressToken === undefined) return undefined;
  return (progress, message) =>
    send({ method: 'notifications/progress', params: { progressToken, progress, message } });
}

/**
 * While `work` runs, sends a progress notification every `intervalMs` when the client asked for
 * progress (a progressToken): SDK clients reset their request timer on it (resetTimeoutOnProgress),
 * so a wait longer than the client's request timeout survives.
 */
export async function withProgress<T>(
  progress: ToolContext['progress'],
  intervalMs: number,
  work: Promise<T>,
): Promise<T> {
  if (!progress) return work;
  const started = Date.now();
  const ticker = setInterval(() => {
    const waited = Math.round((Date.now() - started) / 1000);
    progress(waited, `waiting (${waited} s)`).catch(() => undefined);
  }, intervalMs);
  try {
    return await work;
  } finally {
    clearInterval(ticker);
  }
}
