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

/** POSTs `body` as JSON with the bearer `token`, as an MCP client at 2025-11-25 does. */
export function rawCall(url: string, token: string, body: unknown, agent: Agent): RawCall {
  const payload = JSON.stringify(body);
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
          'mcp-protocol-version': '2025-11-25',
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
