import 'reflect-metadata';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { getMetadataStorage } from 'class-validator';
import { parse } from 'yaml';
import { Environment } from '#app/config/environment.js';

const ROOT = resolve(__dirname, '..', '..');
const TEMPLATES = join(ROOT, 'helm/alcarta/templates');

/** Every setting of the configuration class: each property is validated, so each has validation metadata. */
function classSettings(): string[] {
  const rules = getMetadataStorage().getTargetValidationMetadatas(Environment, '', true, false);
  return [...new Set(rules.map((r) => r.propertyName))].sort();
}

/** A setting name as the copies write it: upper case, ALCARTA_ or one of the two plain names. */
const SETTING_NAME = /^(ALCARTA_[A-Z0-9_]+|DATABASE_URL|PORT)$/;

function envExampleSettings(): string[] {
  const lines = readFileSync(join(ROOT, '.env.example'), 'utf8').split('\n');
  return lines.flatMap((line) => /^([A-Z][A-Z0-9_]*)=/.exec(line)?.[1] ?? []).sort();
}

/**
 * The settings the Helm chart sets: the keys of `config` in values.yaml (the ConfigMap), plus those
 * its templates write themselves (container env from Secrets, ConfigMap entries it computes).
 */
function helmSettings(): string[] {
  const values = parse(readFileSync(join(ROOT, 'helm/alcarta/values.yaml'), 'utf8')) as { config: object };
  const fromTemplates = readdirSync(TEMPLATES).flatMap((file) => {
    const text = readFileSync(join(TEMPLATES, file), 'utf8');
    const env = [...text.matchAll(/- name: ([A-Z][A-Z0-9_]*)\s*$/gm)].map((m) => m[1]);
    const configMapEntries = [...text.matchAll(/^([A-Z][A-Z0-9_]*): \{\{/gm)].map((m) => m[1]);
    return [...env, ...configMapEntries];
  });
  return [...new Set([...Object.keys(values.config), ...fromTemplates])].filter((n) => SETTING_NAME.test(n)).sort();
}

function helmSchemaSettings(): string[] {
  const schema = JSON.parse(readFileSync(join(ROOT, 'helm/alcarta/values.schema.json'), 'utf8')) as {
    properties: { config: { properties: object } };
  };
  return Object.keys(schema.properties.config.properties).sort();
}

function settingsReferenceSettings(): string[] {
  const text = readFileSync(join(ROOT, 'docs/reference/settings.md'), 'utf8');
  return [...text.matchAll(/^\| `([A-Z][A-Z0-9_]*)` /gm)].map((m) => m[1]).sort();
}

/**
 * Settings a copy leaves out on purpose, with the reason. The Helm chart sets every setting: the
 * ones the pods must not choose themselves (ALCARTA_MIGRATIONS, the mail files) it computes.
 */
const DELIBERATELY_ABSENT: Record<string, Record<string, string>> = {
  '.env.example': {},
  'the Helm chart': {},
  // values.schema.json describes `config`; the secrets and computed settings are other values.
  'the Helm values schema (config)': {
    DATABASE_URL: 'database.url or existingSecret (a Secret)',
    ALCARTA_BOOTSTRAP_TOKEN: 'bootstrapToken (a Secret)',
    ALCARTA_CONSOLE_CLIENT_SECRET: 'console.clientSecret (a Secret)',
    ALCARTA_SECRETS_KEY: 'secretsKey or existingSecret (a Secret)',
    ALCARTA_SECRETS_KEY_PREVIOUS: 'previousSecretsKey or existingSecret (a Secret)',
    ALCARTA_SMTP_RELAY_URL: 'mail.relay (a Secret: it holds credentials)',
    ALCARTA_MIGRATIONS: 'set by the chart from migrationJob.enabled',
    ALCARTA_SMTP_TLS_CERT_FILE: 'mounted from mail.tls.secretName',
    ALCARTA_SMTP_TLS_KEY_FILE: 'mounted from mail.tls.secretName',
    ALCARTA_DKIM_SELECTOR: 'mail.dkim.selector',
    ALCARTA_DKIM_PRIVATE_KEY_FILE: 'mounted from mail.dkim',
  },
  'docs/reference/settings.md': {},
};

describe('the copies of the settings agree with the configuration class (src/config/environment.ts)', () => {
  const settings = classSettings();
  const copies: Record<string, () => string[]> = {
    '.env.example': envExampleSettings,
    'the Helm chart': helmSettings,
    'the Helm values schema (config)': helmSchemaSettings,
    'docs/reference/settings.md': settingsReferenceSettings,
  };

  it('reads the class', () => {
    assert.ok(settings.length > 50, `found only ${settings.length} settings`);
    assert.ok(settings.includes('ALCARTA_CONSOLE_CLIENT_SECRET'));
  });

  for (const [copy, read] of Object.entries(copies)) {
    it(`${copy} names every setting, and no setting the class does not know`, () => {
      const named = read();
      const absent = DELIBERATELY_ABSENT[copy];
      assert.deepEqual(
        settings.filter((s) => !named.includes(s) && !(s in absent)),
        [],
        `settings missing from ${copy}`,
      );
      assert.deepEqual(
        named.filter((s) => !settings.includes(s)),
        [],
        `${copy} names settings the class does not know`,
      );
      assert.deepEqual(
        Object.keys(absent).filter((s) => named.includes(s) || !settings.includes(s)),
        [],
        `${copy}: listed as absent but present, or not a setting`,
      );
    });
  }
});
