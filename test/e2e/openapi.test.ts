import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import SwaggerParser from '@apidevtools/swagger-parser';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { connectMcp, callOk } from '../support/mcp';
import { secretsKey } from '../support/connected-mailboxes';
import { REPO_ROOT } from '../support/spawned-server';
import { createToken, ingest, startTestServer, TestServer } from '../support/test-server';

/**
 * /openapi.json from a real server: public, OpenAPI 3, the committed docs/reference/openapi.json,
 * complete (every route the application registers under /v1), and true (real answers match the
 * schemas it states, with no field it does not name).
 */
type Json = Record<string, any>;

/** The routes Express holds for the application, as OpenAPI paths (`:id` → `{id}`). */
function registeredRoutes(server: TestServer): { method: string; path: string }[] {
  const express = server.running.app.getHttpAdapter().getInstance() as {
    router: { stack: { route?: { path: string; methods: Record<string, boolean> } }[] };
  };
  return express.router.stack.flatMap(({ route }) =>
    route ? Object.keys(route.methods).map((method) => ({ method, path: route.path.replace(/:(\w+)/g, '{$1}') })) : [],
  );
}

/** The schema with every object closed: an answer with a field the document does not name fails. */
function closed(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closed);
  if (!schema || typeof schema !== 'object') return schema;
  const copy = Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, k === 'properties' ? v : closed(v)]));
  if (copy.properties) {
    copy.properties = Object.fromEntries(Object.entries(copy.properties as Json).map(([k, v]) => [k, closed(v)]));
    if (copy.additionalProperties === undefined) copy.additionalProperties = false;
  }
  return copy;
}

describe('OpenAPI document at /openapi.json', () => {
  let server: TestServer;
  let document: Json;
  let ajv: Ajv;

  /** Asserts that `body` is what the document says `schema` (a components.schemas name) is. */
  const assertShape = (schema: string, body: unknown) => {
    const valid = ajv.validate({ $ref: `openapi.json#/components/schemas/${schema}` }, body);
    assert.ok(valid, `${schema}: ${ajv.errorsText()}\n${JSON.stringify(body)}`);
  };

  before(async () => {
    // A secrets key: webhook endpoints keep their signing secrets sealed with it.
    server = await startTestServer({ env: { ALCARTA_SECRETS_KEY: secretsKey() } });
    const res = await fetch(`${server.url}/openapi.json`);
    assert.equal(res.status, 200, 'served without a token');
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    document = (await res.json()) as Json;
    ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema({ $id: 'openapi.json', components: closed(document.components) as Json });
  });

  after(() => server?.close());

  it('is a valid OpenAPI 3 document whose references all resolve, the one committed in docs/reference', async () => {
    assert.match(String(document.openapi), /^3\.\d+\.\d+$/);
    // The OpenAPI specification's own JSON schema, and every $ref resolved (it changes what it is given).
    await SwaggerParser.validate(structuredClone(document) as never);
    assert.ok(document.info.title && document.info.version);
    assert.equal(document.components.securitySchemes.bearer.scheme, 'bearer');
    const refs = [...JSON.stringify(document).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(
      refs.filter((name) => !(name in document.components.schemas)),
      [],
    );
    const ids = Object.values(document.paths as Json).flatMap((item) =>
      Object.values(item as Json).map((op) => op.operationId),
    );
    assert.equal(new Set(ids).size, ids.length, 'operation ids are unique');
    const committed = JSON.parse(readFileSync(join(REPO_ROOT, 'docs/reference/openapi.json'), 'utf8')) as Json;
    assert.deepEqual(document, committed, 'docs/reference/openapi.json is current (npm run docs:reference)');
  });

  it('describes every route the application registers under /v1, with its path parameters', () => {
    const routes = registeredRoutes(server).filter((r) => r.path.startsWith('/v1/'));
    assert.ok(routes.length >= 15, `found ${routes.length} routes under /v1`);
    for (const { method, path } of routes) {
      const operation = document.paths[path]?.[method] as Json | undefined;
      assert.ok(operation, `${method.toUpperCase()} ${path} is in the document`);
      const declared = ((operation.parameters ?? []) as Json[]).filter((p) => p.in === 'path').map((p) => p.name);
      assert.deepEqual(declared.sort(), [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort(), `${path} params`);
      assert.ok(Object.keys(operation.responses).length > 0);
      if (path !== '/v1/waits/ws') assert.deepEqual(operation.security, [{ bearer: [] }], `${path} needs a token`);
    }
  });

  it('states the answers the server gives', async () => {
    const { admin } = server;
    const created = await admin.post('/v1/mailboxes', { address: `openapi-${process.pid}@example.com`, name: 'Docs' });
    assert.equal(created.status, 201);
    assertShape('Mailbox', created.body);
    assert.throws(() => assertShape('Mailbox', { ...created.body, surprise: true }), 'the schemas are closed');
    const mailboxId = created.body.mailbox_id as string;
    assertShape('MailboxList', (await admin.get('/v1/mailboxes')).body);

    const token = await admin.post('/v1/tokens', {
      name: 'openapi agent',
      scopes: ['mail:read', 'approvals:read'],
      mailboxes: [mailboxId],
    });
    assertShape('CreatedToken', token.body);
    assertShape('TokenList', (await admin.get('/v1/tokens')).body);
    const grant = await admin.post('/v1/grants', { principal: 'sub:openapi-person', mailboxes: [mailboxId] });
    assert.equal(grant.status, 201, JSON.stringify(grant.body));
    assertShape('Grant', grant.body);
    assertShape('GrantList', (await admin.get('/v1/grants')).body);

    const ingested = await admin.post(`/v1/mailboxes/${mailboxId}/messages`, {
      from: 'sender@example.org',
      to: [`openapi-${process.pid}@example.com`],
      subject: 'Hello',
      text: 'Hi',
    });
    assertShape('IngestResult', ingested.body);
    await ingest(admin, mailboxId);

    const approvers = await admin.request('PUT', `/v1/mailboxes/${mailboxId}/approvers`, {
      emails: ['approver@example.com'],
    });
    assertShape('Approvers', approvers.body);
    assertShape('Approvers', (await admin.get(`/v1/mailboxes/${mailboxId}/approvers`)).body);

    const agent = await connectMcp(server.url, token.body.secret as string);
    const { request_id: requestId } = await callOk(agent, 'request_approval', {
      mailbox_id: mailboxId,
      title: 'Publish the reference',
      details: 'docs/reference',
    });
    await agent.close();
    const decider = await createToken(admin, { scopes: ['approvals:decide'], mailboxes: [mailboxId] });
    const requests = await admin.withToken(decider.secret).get(`/v1/requests?state=pending&mailbox_id=${mailboxId}`);
    assertShape('RequestList', requests.body);
    const approved = await admin.withToken(decider.secret).post(`/v1/requests/${requestId}/approve`, { reason: 'ok' });
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    assertShape('Request', approved.body);
    assertShape('OutboxList', (await admin.get('/v1/outbox')).body);

    const webhook = await admin.post('/v1/webhooks', {
      url: 'https://hooks.example.com/alcarta',
      events: ['message_received'],
      mailbox_ids: [mailboxId],
      description: 'docs',
    });
    assert.equal(webhook.status, 201, JSON.stringify(webhook.body));
    assertShape('WebhookWithSecret', webhook.body);
    const webhookId = webhook.body.webhook_id as string;
    assertShape('Webhook', (await admin.get(`/v1/webhooks/${webhookId}`)).body);
    assertShape('Webhook', (await admin.patch(`/v1/webhooks/${webhookId}`, { enabled: false })).body);
    assertShape('WebhookList', (await admin.get('/v1/webhooks')).body);
    assertShape('WebhookWithSecret', (await admin.post(`/v1/webhooks/${webhookId}/rotate-secret`)).body);
    assertShape('WebhookReplay', (await admin.post(`/v1/webhooks/${webhookId}/replay`, { since_cursor: '0' })).body);
    const webhookDeliveries = (await admin.get(`/v1/webhooks/${webhookId}/deliveries`)).body;
    assert.ok(webhookDeliveries.deliveries.length > 0, "the replay queued the endpoint's events");
    assertShape('WebhookDeliveryList', webhookDeliveries);

    // Errors: no token, unknown id, invalid body, a decided request.
    assertShape('Error', (await admin.withToken(undefined).get('/v1/mailboxes')).body);
    assertShape('Error', (await admin.request('DELETE', '/v1/tokens/tok_unknown')).body);
    assertShape('Error', (await admin.post('/v1/mailboxes', { address: 'not an address' })).body);
    assertShape('Error', (await admin.withToken(decider.secret).post(`/v1/requests/${requestId}/reject`, {})).body);
    assertShape('HealthReport', (await admin.get('/health/ready')).body);
  });
});
