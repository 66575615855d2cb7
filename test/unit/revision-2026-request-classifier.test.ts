import 'reflect-metadata';
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyInboundRequest } from '@modelcontextprotocol/server';
import type { Request } from 'express';
import { Revision20260728RequestClassifier } from '#app/mcp/revision-2026-07-28/request-classifier.js';

const VERSION = 'io.modelcontextprotocol/protocolVersion';
const CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';
const LOG_LEVEL = 'io.modelcontextprotocol/logLevel';

interface Variant {
  headers: Record<string, string>;
  body: unknown;
}

const envelope = { [VERSION]: '2026-07-28', [CAPABILITIES]: {} };
const call = (meta: unknown = envelope, top: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: 7,
  method: 'tools/call',
  params: { name: 'email_await', arguments: { timeout_seconds: 1 }, _meta: meta },
  ...top,
});
const headers = (extra: Record<string, string> = {}) => ({
  'content-type': 'application/json',
  'mcp-protocol-version': '2026-07-28',
  'mcp-method': 'tools/call',
  'mcp-name': 'email_await',
  ...extra,
});
const withMeta = (meta: Record<string, unknown>): Variant => ({
  headers: headers(),
  body: call({ ...envelope, ...meta }),
});

/** Requests the SDK accepts, refuses or routes to 2025-11-25, each differing from a plain call in one way. */
const variants: Record<string, Variant> = {
  'a plain call': { headers: headers(), body: call() },
  'with client info and a log level': withMeta({
    [CLIENT_INFO]: { name: 'agent', version: '1.0.0' },
    [LOG_LEVEL]: 'info',
  }),
  'with a declared extension': withMeta({ [CAPABILITIES]: { extensions: { 'io.modelcontextprotocol/tasks': {} } } }),
  'with a string progress token': withMeta({ progressToken: 'p-1' }),
  'with a negative integer progress token': withMeta({ progressToken: -3 }),
  'with a fractional progress token': withMeta({ progressToken: 1.5 }),
  'with a boolean progress token': withMeta({ progressToken: true }),
  'with a null progress token': withMeta({ progressToken: null }),
  'with a progress token beyond 2^53': withMeta({ progressToken: 2 ** 60 }),
  'with a trace context': withMeta({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
  'with a foreign _meta key': withMeta({ 'example.com/x': { deep: [1, 2] } }),
  'with capabilities not an object': withMeta({ [CAPABILITIES]: 'all' }),
  'with extensions not an object': withMeta({ [CAPABILITIES]: { extensions: 5 } }),
  'without capabilities': { headers: headers(), body: call({ [VERSION]: '2026-07-28' }) },
  'with client info missing its version': withMeta({ [CLIENT_INFO]: { name: 'agent' } }),
  'with client info of the wrong type': withMeta({ [CLIENT_INFO]: { name: 3, version: '1' } }),
  'with an unknown log level': withMeta({ [LOG_LEVEL]: 'loud' }),
  'with a numeric protocol version in _meta': withMeta({ [VERSION]: 20260728 }),
  'with the 2025-11-25 revision in _meta': withMeta({ [VERSION]: '2025-11-25' }),
  'with a future revision in _meta and header': {
    headers: headers({ 'mcp-protocol-version': '2027-01-01' }),
    body: call({ ...envelope, [VERSION]: '2027-01-01' }),
  },
  'with _meta an array': { headers: headers(), body: call([envelope]) },
  'without _meta': { headers: headers(), body: call(undefined) },
  'with params an array': { headers: headers(), body: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: [1] } },
  'with an extra top-level member': { headers: headers(), body: call(envelope, { extra: 1 }) },
  'with a result member': { headers: headers(), body: call(envelope, { result: {} }) },
  'with an error member': { headers: headers(), body: call(envelope, { error: { code: 1, message: 'x' } }) },
  'with JSON-RPC 1.0': { headers: headers(), body: call(envelope, { jsonrpc: '1.0' }) },
  'with a string id': { headers: headers(), body: call(envelope, { id: 'call-1' }) },
  'with id -0': { headers: headers(), body: call(envelope, { id: -0 }) },
  'with a fractional id': { headers: headers(), body: call(envelope, { id: 1.5 }) },
  'with a null id': { headers: headers(), body: call(envelope, { id: null }) },
  'with an id beyond 2^53': { headers: headers(), body: call(envelope, { id: 2 ** 60 }) },
  'without an id (a notification)': { headers: headers(), body: call(envelope, { id: undefined }) },
  'with a __proto__ member': {
    headers: headers(),
    body: JSON.parse(`{"__proto__":{},${JSON.stringify(call()).slice(1)}`),
  },
  'with the header naming 2025-11-25': { headers: headers({ 'mcp-protocol-version': '2025-11-25' }), body: call() },
  'with spaces around the header values': {
    headers: headers({ 'mcp-protocol-version': ' 2026-07-28\t', 'mcp-method': ' tools/call ' }),
    body: call(),
  },
  'with the method header naming another method': { headers: headers({ 'mcp-method': 'tools/list' }), body: call() },
  'with the method header in other case': { headers: headers({ 'mcp-method': 'Tools/Call' }), body: call() },
};

function sdkRoutesToModern({ headers: h, body }: Variant, method: string): boolean {
  const route = classifyInboundRequest({
    httpMethod: 'POST',
    protocolVersionHeader: h['mcp-protocol-version'],
    mcpMethodHeader: h['mcp-method'],
    mcpNameHeader: h['mcp-name'],
    body,
  });
  return (
    route.kind === 'modern' &&
    route.messageKind === 'request' &&
    route.classification.revision === '2026-07-28' &&
    route.message.method === method
  );
}

const request = ({ headers: h, body }: Variant) => ({ method: 'POST', headers: h, body }) as unknown as Request;

describe('Revision20260728RequestClassifier', () => {
  it('routes every request to 2026-07-28 exactly when the v2 SDK does, the first time and when it remembers the envelope', () => {
    const classifier = new Revision20260728RequestClassifier();
    for (const round of ['first', 'again']) {
      for (const [name, variant] of Object.entries(variants)) {
        assert.equal(
          classifier.request(request(variant), 'tools/call') !== undefined,
          sdkRoutesToModern(variant, 'tools/call'),
          `${name} (${round})`,
        );
      }
    }
  });

  it('decides without the SDK only what the SDK accepts, and decides the common calls itself', () => {
    const classifier = new Revision20260728RequestClassifier();
    for (const [name, { headers: h, body }] of Object.entries(variants)) {
      const plain = classifier.isPlainRevision20260728Request(
        body as Record<string, unknown>,
        h['mcp-protocol-version'].trim(),
        h['mcp-method'].trim(),
      );
      if (plain) assert.ok(sdkRoutesToModern({ headers: h, body }, 'tools/call'), `${name}: accepted, the SDK refuses`);
    }
    for (const name of ['a plain call', 'with client info and a log level', 'with a string progress token']) {
      const { headers: h, body } = variants[name];
      assert.ok(
        classifier.isPlainRevision20260728Request(
          body as Record<string, unknown>,
          h['mcp-protocol-version'],
          h['mcp-method'],
        ),
        `${name} is decided without the SDK's classification`,
      );
    }
  });

  it('answers only for the method asked for, and not for other HTTP methods or bodies', () => {
    const classifier = new Revision20260728RequestClassifier();
    const plain = variants['a plain call'];
    assert.ok(classifier.request(request(plain), 'tools/call'));
    assert.equal(classifier.request(request(plain), 'subscriptions/listen'), undefined);
    assert.equal(
      classifier.request({ ...request(plain), method: 'GET' } as unknown as Request, 'tools/call'),
      undefined,
    );
    assert.equal(
      classifier.request(request({ headers: headers({ 'content-type': 'text/plain' }), body: call() }), 'tools/call'),
      undefined,
    );
    assert.equal(classifier.request(request({ headers: headers(), body: [call()] }), 'tools/call'), undefined);
  });
});
