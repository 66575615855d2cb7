import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from './app-entry';
import { runHelm } from './helm';

/** The chart helm/alcarta rendered with a real Helm binary, and what its tests look for in it. */
export const CHART = 'helm/alcarta';
export const HOST = 'alcarta.example.com';
export const DATABASE_URL = 'postgres://alcarta:not-a-real-password@postgres.example.internal:5432/alcarta';
export const REQUIRED = [
  '--set',
  'image.repository=registry.example.com/alcarta',
  '--set',
  `database.url=${DATABASE_URL}`,
  '--set',
  `ingress.host=${HOST}`,
];
export const SECRET_SETTINGS = [
  'DATABASE_URL',
  'ALCARTA_BOOTSTRAP_TOKEN',
  'ALCARTA_SMTP_RELAY_URL',
  'ALCARTA_CONSOLE_CLIENT_SECRET',
  'ALCARTA_SECRETS_KEY',
  'ALCARTA_SECRETS_KEY_PREVIOUS',
];
export const RELAY_URL = 'smtp://mailer:not-a-real-password@relay.example.internal:587';
export const DKIM_KEY = '-----BEGIN PRIVATE KEY-----\nnot-a-real-key\n-----END PRIVATE KEY-----\n';

export type Manifest = Record<string, any>;

export function template(...args: string[]): Manifest[] {
  const result = runHelm(['template', 'rel', CHART, '--namespace', 'ops', ...args]);
  assert.equal(result.status, 0, `helm template ${args.join(' ')} failed:\n${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => {
      assert.deepEqual(doc.errors, [], 'helm template printed invalid YAML');
      return doc.toJS() as Manifest | null;
    })
    .filter((m): m is Manifest => m !== null);
}

/** `helm template` must fail; returns its error output. */
export function templateFails(...args: string[]): string {
  const result = runHelm(['template', 'rel', CHART, ...args]);
  assert.notEqual(result.status, 0, `helm template ${args.join(' ')} should have failed`);
  return result.stderr;
}

export function all(manifests: Manifest[], kind: string): Manifest[] {
  return manifests.filter((m) => m.kind === kind);
}

export function one(manifests: Manifest[], kind: string, name?: string): Manifest {
  const found = all(manifests, kind).filter((m) => name === undefined || m.metadata.name === name);
  assert.equal(found.length, 1, `expected one ${kind}${name ? ` ${name}` : ''}, got ${found.length}`);
  return found[0];
}

export const isHook = (m: Manifest) => m.metadata.annotations?.['helm.sh/hook'] !== undefined;
/** The release's own ConfigMap/Secret (not the migration hook's copies). */
export const own = (manifests: Manifest[], kind: string) => {
  const found = all(manifests, kind).filter((m) => !isHook(m));
  assert.equal(found.length, 1, `expected one non-hook ${kind}, got ${found.length}`);
  return found[0];
};

export function envFile(): Map<string, string> {
  const settings = new Map<string, string>();
  for (const line of readFileSync(join(REPO_ROOT, '.env.example'), 'utf8').split('\n')) {
    const match = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (match) settings.set(match[1], match[2]);
  }
  return settings;
}

export const container = (deployment: Manifest) => deployment.spec.template.spec.containers[0];
export const envVar = (c: Manifest, name: string) => ((c.env ?? []) as Manifest[]).find((e) => e.name === name);
/** The `valueFrom.secretKeyRef` of env var `name`, which must exist. */
export function secretRef(c: Manifest, name: string): Manifest {
  const variable = envVar(c, name);
  assert.ok(variable, `env ${name} is set`);
  return variable.valueFrom.secretKeyRef;
}
