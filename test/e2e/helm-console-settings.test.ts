import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { helmBinary, runHelm } from '../support/helm';

/**
 * The approver console's OpenID Connect settings in helm/alcarta: the client id and default scopes
 * are plain settings (ConfigMap), the client secret comes from a Secret, as every other secret does.
 */
const CHART = 'helm/alcarta';
const REQUIRED = [
  '--set',
  'image.repository=registry.example.com/alcarta',
  '--set',
  'ingress.host=alcarta.example.com',
];
const DATABASE = ['--set', 'database.url=postgres://alcarta:not-a-real-password@db.example.internal:5432/alcarta'];
const CLIENT_SECRET = 'not-a-real-client-secret';

type Manifest = Record<string, any>;

function render(...args: string[]): Manifest[] {
  const result = runHelm(['template', 'rel', CHART, ...REQUIRED, ...args]);
  assert.equal(result.status, 0, `helm template failed:\n${result.stderr}`);
  return parseAllDocuments(result.stdout)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((m): m is Manifest => m !== null && m.metadata?.annotations?.['helm.sh/hook'] === undefined);
}

const find = (manifests: Manifest[], kind: string) => {
  const found = manifests.filter((m) => m.kind === kind);
  assert.equal(found.length, 1, `one ${kind}`);
  return found[0];
};
const clientSecretEnv = (manifests: Manifest[]) =>
  (find(manifests, 'Deployment').spec.template.spec.containers[0].env as Manifest[]).find(
    (e) => e.name === 'ALCARTA_CONSOLE_CLIENT_SECRET',
  );

describe('Helm chart: the console sign-in settings', () => {
  before(() => helmBinary());

  it('puts the client id and default scopes in the ConfigMap, empty by default', () => {
    assert.equal(find(render(...DATABASE), 'ConfigMap').data.ALCARTA_CONSOLE_CLIENT_ID, '');
    const data = find(
      render(
        ...DATABASE,
        '--set',
        'config.ALCARTA_CONSOLE_CLIENT_ID=alcarta-console',
        '--set-string',
        'config.ALCARTA_CONSOLE_DEFAULT_SCOPES=approvals:decide',
      ),
      'ConfigMap',
    ).data;
    assert.equal(data.ALCARTA_CONSOLE_CLIENT_ID, 'alcarta-console');
    assert.equal(data.ALCARTA_CONSOLE_DEFAULT_SCOPES, 'approvals:decide');
    assert.equal(data.ALCARTA_CONSOLE_CLIENT_SECRET, undefined, 'the secret is not in the ConfigMap');
  });

  it("reads the client secret from the chart's Secret, optional, and rolls the pods when it changes", () => {
    const without = render(...DATABASE);
    const secret = find(without, 'Secret');
    assert.deepEqual(clientSecretEnv(without)?.valueFrom.secretKeyRef, {
      name: secret.metadata.name,
      key: 'ALCARTA_CONSOLE_CLIENT_SECRET',
      optional: true,
    });
    assert.equal(secret.stringData.ALCARTA_CONSOLE_CLIENT_SECRET, undefined);

    const withSecret = render(...DATABASE, '--set', `console.clientSecret=${CLIENT_SECRET}`);
    assert.equal(find(withSecret, 'Secret').stringData.ALCARTA_CONSOLE_CLIENT_SECRET, CLIENT_SECRET);
    const checksum = (m: Manifest[]) => find(m, 'Deployment').spec.template.metadata.annotations['checksum/secret'];
    assert.notEqual(checksum(withSecret), checksum(without));
  });

  it('reads it from an existingSecret under existingSecretKeys.consoleClientSecret', () => {
    const manifests = render(
      '--set',
      'existingSecret=alcarta-secrets',
      '--set',
      'existingSecretKeys.consoleClientSecret=console-secret',
    );
    assert.deepEqual(clientSecretEnv(manifests)?.valueFrom.secretKeyRef, {
      name: 'alcarta-secrets',
      key: 'console-secret',
      optional: true,
    });
    const refused = runHelm([
      'template',
      'rel',
      CHART,
      ...REQUIRED,
      '--set',
      'existingSecret=alcarta-secrets',
      '--set',
      `console.clientSecret=${CLIENT_SECRET}`,
    ]);
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /console\.clientSecret/);
  });

  it('passes helm lint --strict with a console client configured', () => {
    const result = runHelm([
      'lint',
      CHART,
      '--strict',
      ...REQUIRED,
      ...DATABASE,
      '--set',
      'config.ALCARTA_CONSOLE_CLIENT_ID=alcarta-console',
      '--set',
      `console.clientSecret=${CLIENT_SECRET}`,
    ]);
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.doesNotMatch(result.stdout, /\[(ERROR|WARNING)\]/);
  });
});
