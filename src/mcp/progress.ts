import { ToolContext } from './tool-definition';

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
