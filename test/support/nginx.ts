import { NginxMode, NginxProxy, startNginx as start } from '../tools/nginx';

export type { NginxMode, NginxProxy };

/**
 * A real nginx hop in front of a server under test (the proxies that websocket waits and SSE
 * streams must pass, docs/agents.md "Waits"), see test/tools/nginx.ts. Suites check for it first
 * with `requireSystemPackage('nginx-light')`.
 */
export async function startNginx(options: { upstream: string; mode: NginxMode; port?: number }): Promise<NginxProxy> {
  return start({ upstreams: [options.upstream], mode: options.mode, port: options.port });
}
