import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type RequestOptions } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { invalidRequest } from '../kernel/errors';

/** What a webhook POST came to: the endpoint's answer, or why there was none. */
export type WebhookHttpOutcome =
  /** `bytesRead`: how much of the answer's body was read (at most `maxResponseBytes`). */
  | { kind: 'response'; status: number; durationMs: number; bytesRead: number; body?: Buffer }
  /** `refused`: the target is not allowed (a private address, a redirect…); nothing was sent. */
  | { kind: 'error'; error: string; refused: boolean; durationMs: number };

/** Resolves a host name to its addresses (dns.lookup with `all: true` unless a test injects one). */
export type WebhookLookup = (hostname: string) => Promise<readonly string[]>;

/** The limits of one webhook POST (docs/webhooks.md, "Safe targets"). */
export interface WebhookHttpOptions {
  /** ALCARTA_WEBHOOK_ALLOWED_HOSTS: host names or addresses allowed although private. */
  allowedHosts: readonly string[];
  /** For the whole exchange: connection, request and the answer's body. */
  timeoutMs: number;
  maxResponseBytes: number;
  /** Keep what was read of the answer's body (an Events-extension verification reads its echo). */
  keepBody?: boolean;
  lookup?: WebhookLookup;
}

/** The limits the delivery engine uses (SPEC 17, "Safe targets"). */
export const WEBHOOK_TIMEOUT_MS = 10_000;
export const WEBHOOK_MAX_RESPONSE_BYTES = 64 * 1024;

/** Cloud instance metadata services: named in refusals, as they are what an attacker aims at. */
const METADATA_ADDRESSES = new Set(['169.254.169.254', 'fd00:ec2::254']);

/**
 * Why webhooks may not connect to `address`, or undefined when it is a public unicast address.
 * IPv4-mapped IPv6 addresses (::ffff:127.0.0.1) are judged as the IPv4 address they reach. Only
 * ipaddr.js's `unicast` range is public, and in IPv6 only within global unicast (2000::/3), so
 * that IPv4-compatible (::127.0.0.1), translated and other special forms are refused as well.
 */
export function addressRefusal(address: string): string | undefined {
  // Strictly an address as resolvers write it (ipaddr.js also takes inet_aton forms such as 1.2.3).
  if (isIP(address) === 0) return 'not an IP address';
  const parsed = ipaddr.process(address);
  if (METADATA_ADDRESSES.has(parsed.toString())) return 'a cloud metadata address';
  const range = parsed.range();
  if (range !== 'unicast') return `a ${RANGE_NAMES[range] ?? `special-purpose (${range})`} address`;
  if (parsed instanceof ipaddr.IPv6 && !parsed.match(GLOBAL_UNICAST_V6)) return 'a reserved IPv6 address';
  return undefined;
}

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');

const RANGE_NAMES: Record<string, string> = {
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'private (carrier-grade NAT)',
  private: 'private',
  uniqueLocal: 'unique-local',
  reserved: 'reserved',
};

/** `address` as allow-list entries are compared: IPv4-mapped IPv6 as IPv4, IPv6 compressed. */
function canonicalAddress(address: string): string {
  return ipaddr.process(address).toString();
}

/** Whether the URL's host name or the address connected to is in ALCARTA_WEBHOOK_ALLOWED_HOSTS. */
function isAllowed(allowedHosts: readonly string[], hostname: string, address: string): boolean {
  const canonical = canonicalAddress(address);
  return allowedHosts.some(
    (entry) => entry === hostname || (isIP(entry) !== 0 && canonicalAddress(entry) === canonical),
  );
}

/** Why webhooks may not connect to `address` for `hostname`, allow-list included. */
function connectionRefusal(allowedHosts: readonly string[], hostname: string, address: string): string | undefined {
  const refusal = addressRefusal(address);
  if (refusal === undefined || isAllowed(allowedHosts, hostname, address)) return undefined;
  const shown = hostname === address ? address : `${hostname} (${address})`;
  return `${shown} is ${refusal}; list it in ALCARTA_WEBHOOK_ALLOWED_HOSTS to allow it`;
}

/** A parsed target: its host name as compared (no brackets, lower case, no trailing dot). */
interface Target {
  url: URL;
  hostname: string;
}

/**
 * The URL as a webhook target, or why it is not one: http(s) only, no credentials, and a literal
 * IP address (which WHATWG URL has normalized: 127.1 and 2130706433 are 127.0.0.1) or a
 * `localhost` name must be allowed.
 */
function parseTarget(raw: string, allowedHosts: readonly string[]): Target | string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'not a valid absolute URL';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the scheme ${url.protocol} is not http: or https:`;
  if (url.username !== '' || url.password !== '') return 'credentials in the URL are not allowed';
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (hostname === '') return 'the URL has no host';
  if (isIP(hostname)) {
    const refusal = connectionRefusal(allowedHosts, hostname, hostname);
    if (refusal) return refusal;
  } else if ((hostname === 'localhost' || hostname.endsWith('.localhost')) && !allowedHosts.includes(hostname)) {
    // RFC 6761: such names are loopback; refusing them here spares a doomed endpoint.
    return `${hostname} is a loopback name; list it in ALCARTA_WEBHOOK_ALLOWED_HOSTS to allow it`;
  }
  return { url, hostname };
}

/**
 * Checks a webhook URL when an endpoint is created or changed: http(s) only, no credentials, no
 * refused literal address. Throws 400 `invalid_url` naming the field `url`. A host name is
 * resolved and checked at each delivery instead (its addresses may change).
 */
export function assertWebhookUrl(url: string, allowedHosts: readonly string[] = []): void {
  const target = parseTarget(url, allowedHosts);
  if (typeof target === 'string') {
    throw invalidRequest('invalid_url', `The webhook URL is refused: ${target}.`, { field: 'url' });
  }
}

/** The error a refused connection fails with: the request never reaches a socket. */
class RefusedTarget extends Error {}

type LookupCallback = (err: Error | null, address: string | LookupAddress[], family?: number) => void;

/**
 * The `lookup` of the request's socket: resolves the host name and refuses it when any of its
 * addresses is refused, so the address connected to is one that was checked (a name that
 * answered a public address when the endpoint was saved cannot rebind to a private one).
 */
function guardedLookup(allowedHosts: readonly string[], resolve: WebhookLookup) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    resolve(name).then(
      (addresses) => {
        if (addresses.length === 0) return callback(new Error(`${name} has no address`), []);
        for (const address of addresses) {
          const refusal = connectionRefusal(allowedHosts, name, address);
          if (refusal) return callback(new RefusedTarget(refusal), []);
        }
        const found = addresses.map((address) => ({ address, family: isIP(address) }));
        const wanted = options.family ? found.filter((a) => a.family === options.family) : found;
        if (wanted.length === 0) return callback(new Error(`${name} has no IPv${options.family} address`), []);
        if (options.all) callback(null, wanted);
        else callback(null, wanted[0].address, wanted[0].family);
      },
      (err: Error) => callback(err, []),
    );
  };
}

/** dns.lookup with every address (the system resolver, as any other connection of the server). */
function systemLookup(hostname: string): Promise<readonly string[]> {
  return new Promise((resolve, reject) => {
    dnsLookup(hostname, { all: true }, (err, addresses) =>
      err ? reject(err) : resolve(addresses.map((a) => a.address)),
    );
  });
}

/**
 * An idle kept-alive connection is closed after this long: below the 5 s that Node's servers
 * (and many others) keep an idle connection, so that the endpoint seldom closes one as it is reused.
 */
const IDLE_CONNECTION_MS = 4000;

/**
 * Origins whose agents are kept; beyond it, the least recently added is forgotten (its POSTs in
 * flight finish; its idle connections close after IDLE_CONNECTION_MS).
 */
const MAX_ORIGINS = 1000;

/**
 * Kept-alive connections for webhook POSTs: one agent per endpoint origin (and allow-list, which
 * judged its connections). A connection is made, its address checked by the guarded lookup, only
 * when no idle one to that origin is free; reusing one sends to the address already checked. Idle
 * connections do not keep the process alive (Node's agents unref them).
 */
export class WebhookConnections {
  private readonly agents = new Map<string, HttpAgent>();

  agentFor(url: URL, allowedHosts: readonly string[]): HttpAgent {
    const key = `${url.origin} ${allowedHosts.join(',')}`;
    let agent = this.agents.get(key);
    if (!agent) {
      const settings = { keepAlive: true, timeout: IDLE_CONNECTION_MS, scheduling: 'lifo' as const };
      agent = url.protocol === 'https:' ? new HttpsAgent(settings) : new HttpAgent(settings);
      this.agents.set(key, agent);
      if (this.agents.size > MAX_ORIGINS) this.agents.delete(this.agents.keys().next().value as string);
    }
    return agent;
  }
}

/**
 * POSTs `body` to `url` with `headers`, through the guarded lookup (a literal address is checked
 * before): on a fresh connection, or on an idle kept-alive one of `connections` when given (its
 * address was checked when it was made). A redirect is an answer like any other, never followed;
 * the whole exchange is cut after `timeoutMs`, and at most `maxResponseBytes` of the answer are
 * read before the connection is closed. A kept-alive connection the endpoint closed just as it was
 * reused (no answer at all) is retried once on a fresh one.
 */
export async function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: WebhookHttpOptions,
  connections?: WebhookConnections,
): Promise<WebhookHttpOutcome> {
  const started = Date.now();
  const target = parseTarget(url, options.allowedHosts);
  if (typeof target === 'string') {
    return { kind: 'error', error: target, refused: true, durationMs: Date.now() - started };
  }
  const payload = Buffer.from(body);
  const deadline = started + options.timeoutMs;
  const agent = connections?.agentFor(target.url, options.allowedHosts);
  const first = await sendOnce(target, payload, headers, options, agent ?? false, started, deadline);
  if (first !== STALE_CONNECTION) return first;
  const retried = await sendOnce(target, payload, headers, options, false, started, deadline);
  return retried === STALE_CONNECTION ? staleOutcome(started) : retried;
}

/** A reused connection failed before any answer: the endpoint had closed it. */
const STALE_CONNECTION = Symbol('stale connection');

function staleOutcome(started: number): WebhookHttpOutcome {
  return {
    kind: 'error',
    error: 'the connection was closed before an answer',
    refused: false,
    durationMs: Date.now() - started,
  };
}

/** One request; `agent` false: a fresh connection, closed afterwards. */
function sendOnce(
  target: Target,
  payload: Buffer,
  headers: Record<string, string>,
  options: WebhookHttpOptions,
  agent: HttpAgent | false,
  started: number,
  deadline: number,
): Promise<WebhookHttpOutcome | typeof STALE_CONNECTION> {
  const requestOptions: RequestOptions = {
    method: 'POST',
    hostname: target.url.hostname.replace(/^\[(.*)\]$/, '$1'),
    port: target.url.port || undefined,
    path: `${target.url.pathname}${target.url.search}`,
    headers: { 'content-type': 'application/json', ...headers, 'content-length': String(payload.length) },
    agent,
    // Used by the agent only when it makes a new connection: every connection's address is checked.
    lookup: guardedLookup(options.allowedHosts, options.lookup ?? systemLookup),
  };
  const send = target.url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    let answered = false;
    /** `keep`: the answer was read to its end, so a kept-alive connection may serve the next POST. */
    const finish = (outcome: WebhookHttpOutcome | typeof STALE_CONNECTION, keep = false) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (!(keep && agent)) req.destroy();
      resolve(outcome);
    };
    const fail = (err: Error) => {
      if (!answered && req.reusedSocket && isConnectionReset(err)) return finish(STALE_CONNECTION);
      finish({
        kind: 'error',
        error: err.message,
        refused: err instanceof RefusedTarget,
        durationMs: Date.now() - started,
      });
    };
    const req = send(requestOptions, (res: IncomingMessage) => {
      answered = true;
      const status = res.statusCode ?? 0;
      let bytesRead = 0;
      const kept: Buffer[] = [];
      const outcome = () => ({
        kind: 'response' as const,
        status,
        durationMs: Date.now() - started,
        bytesRead,
        ...(options.keepBody ? { body: Buffer.concat(kept).subarray(0, options.maxResponseBytes) } : {}),
      });
      res.on('data', (chunk: Buffer) => {
        if (options.keepBody) kept.push(chunk);
        bytesRead = Math.min(bytesRead + chunk.length, options.maxResponseBytes);
        if (bytesRead >= options.maxResponseBytes) finish(outcome());
      });
      res.on('end', () => finish(outcome(), true));
      // The endpoint closing mid-body still answered with its status.
      res.on('error', () => finish(outcome()));
      res.on('close', () => finish(outcome()));
    });
    const timer = setTimeout(
      () => fail(new Error(`no complete answer within ${options.timeoutMs} ms`)),
      Math.max(0, deadline - Date.now()),
    );
    req.on('error', fail);
    req.end(payload);
  });
}

function isConnectionReset(err: Error): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ECONNRESET' || code === 'EPIPE' || code === 'ECONNABORTED';
}

/**
 * What went wrong with an attempt, as a category that says nothing of the endpoint's answer beyond
 * its class (the Events extension's `lastError`; a raw answer would make Alcarta an oracle for
 * whatever a URL points at).
 */
export type WebhookFailureCategory = 'connection_refused' | 'timeout' | 'tls_error' | 'http_4xx' | 'http_5xx';

export function failureCategory(outcome: { status: number | null; error: string | null }): WebhookFailureCategory {
  if (outcome.status !== null) return outcome.status >= 500 ? 'http_5xx' : 'http_4xx';
  const error = outcome.error ?? '';
  if (/no complete answer within|ETIMEDOUT|timed? ?out/i.test(error)) return 'timeout';
  if (/certificate|self.signed|TLS|SSL|handshake|ERR_TLS|unable to verify|altnames/i.test(error)) return 'tls_error';
  return 'connection_refused';
}
