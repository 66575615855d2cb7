import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { helmBinary, runHelm } from '../support/helm';
import {
  CHART,
  container,
  HOST,
  Manifest,
  one,
  own,
  REQUIRED,
  secretRef,
  template,
  templateFails,
} from '../support/helm-chart';

/**
 * The key of connected mailboxes' secrets in helm/alcarta: ALCARTA_SECRETS_KEY and
 * ALCARTA_SECRETS_KEY_PREVIOUS reach the pods from a Secret, the chart's (secretsKey,
 * previousSecretsKey) or the operator's (existingSecret), never from the ConfigMap.
 */
const KEY = randomBytes(32).toString('base64');
const PREVIOUS_KEY = randomBytes(32).toString('base64');
const SECRET_KEYS = ['ALCARTA_SECRETS_KEY', 'ALCARTA_SECRETS_KEY_PREVIOUS'];

const checksum = (manifests: Manifest[]) =>
  one(manifests, 'Deployment').spec.template.metadata.annotations['checksum/secret'] as string;

describe("Helm chart: the connected mailboxes' secrets key", () => {
  before(() => helmBinary());

  it("reads both keys from the chart's Secret, optional, and stores them only when given", () => {
    const without = template(...REQUIRED);
    const secret = own(without, 'Secret');
    for (const name of SECRET_KEYS) {
      assert.deepEqual(secretRef(container(one(without, 'Deployment')), name), {
        name: secret.metadata.name,
        key: name,
        optional: true,
      });
      assert.equal(secret.stringData[name], undefined);
      assert.equal(own(without, 'ConfigMap').data[name], undefined, `${name} is not in the ConfigMap`);
    }

    const withKeys = template(...REQUIRED, '--set', `secretsKey=${KEY}`, '--set', `previousSecretsKey=${PREVIOUS_KEY}`);
    assert.equal(own(withKeys, 'Secret').stringData.ALCARTA_SECRETS_KEY, KEY);
    assert.equal(own(withKeys, 'Secret').stringData.ALCARTA_SECRETS_KEY_PREVIOUS, PREVIOUS_KEY);
    assert.ok(!JSON.stringify(own(withKeys, 'ConfigMap')).includes(KEY));
    assert.notEqual(checksum(withKeys), checksum(without), 'a new key rolls the pods');
  });

  it('reads them from an existingSecret under existingSecretKeys, and refuses keys given beside it', () => {
    const manifests = template(
      '--set',
      'image.repository=registry.example.com/alcarta',
      '--set',
      `ingress.host=${HOST}`,
      '--set',
      'existingSecret=alcarta-secrets',
      '--set',
      'existingSecretKeys.secretsKey=mailbox-key',
    );
    const c = container(one(manifests, 'Deployment'));
    assert.deepEqual(secretRef(c, 'ALCARTA_SECRETS_KEY'), {
      name: 'alcarta-secrets',
      key: 'mailbox-key',
      optional: true,
    });
    assert.deepEqual(secretRef(c, 'ALCARTA_SECRETS_KEY_PREVIOUS'), {
      name: 'alcarta-secrets',
      key: 'ALCARTA_SECRETS_KEY_PREVIOUS',
      optional: true,
    });
    assert.match(
      templateFails(
        '--set',
        'image.repository=r/a',
        '--set',
        `ingress.host=${HOST}`,
        '--set',
        'existingSecret=s',
        '--set',
        `secretsKey=${KEY}`,
      ),
      /secretsKey/,
    );
  });

  it('refuses a key that is not 32 bytes in base64', () => {
    for (const bad of [randomBytes(16).toString('base64'), randomBytes(32).toString('hex'), 'not-a-key']) {
      assert.match(templateFails(...REQUIRED, '--set', `secretsKey=${bad}`), /secretsKey/);
      assert.match(templateFails(...REQUIRED, '--set', `previousSecretsKey=${bad}`), /previousSecretsKey/);
    }
  });

  it('passes helm lint --strict with both keys set', () => {
    const result = runHelm([
      'lint',
      CHART,
      '--strict',
      ...REQUIRED,
      '--set',
      `secretsKey=${KEY}`,
      '--set',
      `previousSecretsKey=${PREVIOUS_KEY}`,
    ]);
    assert.equal(result.status, 0, `${result.stdout}\n${result.stderr}`);
    assert.doesNotMatch(result.stdout, /\[(ERROR|WARNING)\]/);
  });
});
