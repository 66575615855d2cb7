import { NginxMode, NginxProxy, NginxUnavailableError, startNginx as start } from '../tools/nginx';

export type { NginxMode, NginxProxy };
export { NginxUnavailableError };

/**
 * A real nginx hop in front of a server under test (SPEC §4 "Proxies"), see test/tools/nginx.ts.
 * Without nginx, or when it does not start, the proxy tests fail — unless
 * ALCARTA_TEST_WITHOUT_NGINX=1 lets them skip (see `nginxSkipReason`).
 */
export async function startNginx(options: { upstream: string; mode: NginxMode; port?: number }): Promise<NginxProxy> {
  try {
    return await start({ upstreams: [options.upstream], mode: options.mode, port: options.port });
  } catch (err) {
    if (!(err instanceof NginxUnavailableError)) throw err;
    throw new NginxUnavailableError(
      err.summary,
      `${err.message} (the proxy tests need nginx; set ${SKIP_VARIABLE}=1 to skip them)`,
    );
  }
}

const SKIP_VARIABLE = 'ALCARTA_TEST_WITHOUT_NGINX';

/**
 * Why proxy tests may skip instead of failing: `err` is an `NginxUnavailableError` and
 * ALCARTA_TEST_WITHOUT_NGINX=1 is set. Otherwise undefined (the error must fail the test).
 */
export function nginxSkipReason(err: unknown): string | undefined {
  if (process.env[SKIP_VARIABLE] !== '1' || !(err instanceof NginxUnavailableError)) return undefined;
  return `${err.summary} (${SKIP_VARIABLE}=1)`;
}
