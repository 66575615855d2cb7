/**
 * The benchmarks' MCP client: raw JSON-RPC over `node:http` (no connect timeout, no pool limit, no
 * SDK objects), so that the client's own overhead stays small beside thousands of parked calls.
 */
import { Agent, request } from 'node:http';

export interface RawCall {
  /** Resolves when the response headers arrived: the server accepted the call. */
  accepted: Promise<void>;
  /** The whole response body. */
  body: Promise<string>;
}

/** The MCP revisions the benchmarks speak. */
export type BenchRevision = '2025-11-25' | '2026-07-28';

/**
 * POSTs `body` as JSON with the bearer `token`, as an MCP client at `revision` does: at 2026-07-28
 * the request also names its method (and a tools/call its tool) in the standard headers, and the
 * body carries the `_meta` envelope (added here).
 */
export function rawCall(
  url: string,
  token: string,
  body: unknown,
  agent: Agent,
  revision: BenchRevision = '2025-11-25',
): RawCall {
  const payload = JSON.stringify(revision === '2026-07-28' ? withEnvelope(body) : body);
  let accept!: () => void;
  const accepted = new Promise<void>((resolve) => (accept = resolve));
  const text = new Promise<string>((resolve, reject) => {
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': revision,
          ...(revision === '2026-07-28' && revision2026Headers(body)),
          'content-length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        accept();
        let data = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (data += chunk));
        res.on('error', reject);
        res.on('end', () =>
          res.statusCode! >= 300 ? reject(new Error(`${url}: ${res.statusCode} ${data}`)) : resolve(data),
        );
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
  // A call that fails before its headers frees its slot too; the failure surfaces through `body`.
  text.catch(() => accept());
  return { accepted, body: text };
}

interface RawRequest {
  method: string;
  params?: { name?: string; _meta?: Record<string, unknown> };
}

/** A 2026-07-28 request: the revision and (empty) client capabilities in `params._meta`. */
function withEnvelope(body: unknown): RawRequest {
  const request = body as RawRequest;
  return {
    ...request,
    params: {
      ...request.params,
      _meta: {
        ...request.params?._meta,
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  };
}

/** `Mcp-Method`, and for a call `Mcp-Name`: the headers 2026-07-28 requires beside the body. */
function revision2026Headers(body: unknown): Record<string, string> {
  const { method, params } = body as RawRequest;
  return { 'mcp-method': method, ...(params?.name !== undefined && { 'mcp-name': params.name }) };
}

/** The JSON-RPC response in an SSE body: the tool result's structured content. */
export function toolResult(text: string): any {
  const response = text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => JSON.parse(l.slice(6)))
    .find((m) => m.id !== undefined);
  if (!response?.result || response.result.isError) throw new Error(`no tool result in: ${text.slice(0, 400)}`);
  return response.result.structuredContent;
}
