import 'reflect-metadata';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { after, describe, it } from 'node:test';
import { AppConfig } from '#app/config/app-config.js';
import { validateEnvironment } from '#app/config/environment.js';
import { AlcartaError } from '#app/kernel/errors.js';
import { SecretBox, secretsKeyId, UnreadableSecret } from '#app/secrets/secret-box.js';
import {
  embeddedSecretsKeySettings,
  loadOrCreateSecretsKeyFile,
  SECRETS_KEY_FILE,
} from '#app/secrets/secrets-key-file.js';

const newKey = () => randomBytes(32).toString('base64');

function configWith(settings: Record<string, string>): AppConfig {
  return new AppConfig(validateEnvironment(settings));
}

function boxWith(current: string | undefined, previous?: string): SecretBox {
  return new SecretBox(
    configWith({
      ...(current ? { ALCARTA_SECRETS_KEY: current } : {}),
      ...(previous ? { ALCARTA_SECRETS_KEY_PREVIOUS: previous } : {}),
    }),
  );
}

/** `sealed` with one byte of its part at `index` (1: key id, 2: iv, 3: ciphertext, 4: tag) changed. */
function withFlippedByte(sealed: string, index: number): string {
  const parts = sealed.split('.');
  if (index === 1) {
    parts[1] = parts[1].replace(/^./, (c) => (c === '0' ? '1' : '0'));
  } else {
    const bytes = Buffer.from(parts[index], 'base64url');
    bytes[bytes.length - 1] ^= 0x01;
    parts[index] = bytes.toString('base64url');
  }
  return parts.join('.');
}

describe('SecretBox', () => {
  const key = newKey();
  const box = boxWith(key);

  it('opens what it sealed, for empty, ASCII and multi-byte secrets', () => {
    for (const secret of ['', 'hunter2', '1//0gRefreshToken-with_chars.~', 'pässwörd 🔑', 'x'.repeat(10_000)]) {
      assert.equal(box.open(box.seal(secret)), secret);
    }
  });

  it('seals as v1.<key id>.<iv>.<ciphertext>.<tag>, naming the key by the first 8 hex characters of its SHA-256', () => {
    const sealed = box.seal('hunter2');
    const [version, keyId, iv, ciphertext, tag] = sealed.split('.');
    assert.equal(version, 'v1');
    assert.equal(keyId, secretsKeyId(Buffer.from(key, 'base64')));
    assert.match(keyId, /^[0-9a-f]{8}$/);
    assert.equal(Buffer.from(iv, 'base64url').length, 12);
    assert.equal(Buffer.from(ciphertext, 'base64url').length, 'hunter2'.length);
    assert.equal(Buffer.from(tag, 'base64url').length, 16);
    assert.ok(!sealed.includes('hunter2'));
  });

  it('uses a fresh IV for every seal, so equal secrets never seal alike', () => {
    const sealed = Array.from({ length: 200 }, () => box.seal('same secret'));
    assert.equal(new Set(sealed).size, sealed.length);
    assert.equal(new Set(sealed.map((s) => s.split('.')[2])).size, sealed.length);
  });

  it('refuses a value with any part altered, never returning other text', () => {
    const sealed = box.seal('refresh token');
    for (const index of [1, 2, 3, 4]) {
      assert.throws(() => box.open(withFlippedByte(sealed, index)), UnreadableSecret, `part ${index}`);
    }
  });

  it('refuses a changed character even where base64url would decode it to the same bytes', () => {
    const sealed = box.seal('refresh token');
    const tag = sealed.split('.')[4];
    // 16 bytes are 22 characters whose last one carries 4 unused bits: its neighbours decode alike.
    const last = tag.at(-1)!;
    const sibling = last === 'A' ? 'B' : String.fromCharCode(last.charCodeAt(0) ^ 1);
    assert.throws(() => box.open(`${sealed.slice(0, -1)}${sibling}`), UnreadableSecret);
  });

  it('refuses malformed values with a clear error', () => {
    for (const value of ['', 'hunter2', 'v1.abc', 'v2.00000000.AAAA.AAAA.AAAA', `${box.seal('x')}.extra`]) {
      assert.throws(
        () => box.open(value),
        (err) => err instanceof UnreadableSecret && /sealed secret/.test(err.message),
      );
    }
  });

  it('refuses a value sealed with another key, naming the keys by id only', () => {
    const otherKey = newKey();
    const sealed = boxWith(otherKey).seal('hunter2');
    assert.throws(
      () => box.open(sealed),
      (err) =>
        err instanceof UnreadableSecret &&
        err.message.includes(secretsKeyId(Buffer.from(otherKey, 'base64'))) &&
        err.message.includes('ALCARTA_SECRETS_KEY_PREVIOUS') &&
        !err.message.includes(otherKey) &&
        !err.message.includes(key),
    );
  });

  it('refuses a value sealed with another key whose key id was changed to the current key id', () => {
    const other = boxWith(newKey());
    const sealed = other.seal('hunter2').split('.');
    sealed[1] = secretsKeyId(Buffer.from(key, 'base64'));
    assert.throws(() => box.open(sealed.join('.')), UnreadableSecret);
  });

  it('after a rotation opens what the previous key sealed, says it needs resealing, and reseals with the new key', () => {
    const oldKey = newKey();
    const sealedBefore = boxWith(oldKey).seal('hunter2');
    const rotated = boxWith(newKey(), oldKey);
    assert.equal(rotated.open(sealedBefore), 'hunter2');
    assert.equal(rotated.needsResealing(sealedBefore), true);
    const resealed = rotated.seal(rotated.open(sealedBefore));
    assert.equal(rotated.needsResealing(resealed), false);
    assert.equal(rotated.open(resealed), 'hunter2');
    assert.throws(() => boxWith(oldKey).open(resealed), UnreadableSecret);
    assert.equal(box.needsResealing(box.seal('x')), false);
  });

  it('without a key is not available, and seal and open answer secrets_key_missing naming ALCARTA_SECRETS_KEY', () => {
    const keyless = boxWith(undefined);
    assert.equal(keyless.available, false);
    assert.equal(box.available, true);
    const missing = (err: unknown) =>
      err instanceof AlcartaError &&
      err.code === 'invalid_request' &&
      err.reason === 'secrets_key_missing' &&
      err.message.includes('ALCARTA_SECRETS_KEY');
    assert.throws(() => keyless.seal('hunter2'), missing);
    assert.throws(() => keyless.open(box.seal('hunter2')), missing);
  });

  it('never shows its keys when inspected or serialised, nor does the configuration', () => {
    const config = configWith({ ALCARTA_SECRETS_KEY: key, ALCARTA_SECRETS_KEY_PREVIOUS: newKey() });
    const keyBytes = Buffer.from(key, 'base64');
    for (const shown of [
      inspect(box, { depth: 5 }),
      JSON.stringify(box),
      inspect(config, { depth: 5 }),
      JSON.stringify(config),
    ]) {
      assert.ok(!shown.includes(key), shown);
      assert.ok(!shown.includes(keyBytes.toString('hex')), shown);
      assert.ok(!shown.includes(inspect(keyBytes)), shown);
    }
    assert.deepEqual(config.secretsKey, keyBytes);
  });
});

describe('ALCARTA_SECRETS_KEY and ALCARTA_SECRETS_KEY_PREVIOUS', () => {
  it('accept 32 bytes in base64', () => {
    const key = newKey();
    assert.deepEqual(configWith({ ALCARTA_SECRETS_KEY: key }).secretsKey, Buffer.from(key, 'base64'));
    assert.equal(configWith({ ALCARTA_SECRETS_KEY: '' }).secretsKey, undefined);
  });

  it('refuse another length or alphabet with a message naming the variable, never the value', () => {
    for (const variable of ['ALCARTA_SECRETS_KEY', 'ALCARTA_SECRETS_KEY_PREVIOUS']) {
      for (const value of [
        randomBytes(16).toString('base64'),
        randomBytes(33).toString('base64'),
        randomBytes(32).toString('hex'),
        randomBytes(32).toString('base64url').replace(/^./, '-'),
      ]) {
        assert.throws(
          () => validateEnvironment({ [variable]: value }),
          (err) =>
            err instanceof Error &&
            err.message.includes(`${variable} must be 32 bytes`) &&
            !err.message.includes(value),
          `${variable}=${value}`,
        );
      }
    }
  });
});

describe('the embedded database key file', () => {
  const dirs: string[] = [];
  const tempDir = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'alcarta-secrets-'));
    dirs.push(dir);
    return dir;
  };
  after(async () => {
    await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  });

  it('is created once with 32 random bytes, mode 0600, and read back on later starts', async () => {
    const dataDir = join(await tempDir(), 'data');
    const first = await loadOrCreateSecretsKeyFile(dataDir);
    assert.equal(first.length, 32);
    const file = join(dataDir, SECRETS_KEY_FILE);
    assert.equal((await stat(file)).mode & 0o777, 0o600);
    assert.deepEqual(await loadOrCreateSecretsKeyFile(dataDir), first);
    assert.equal((await readFile(file, 'utf8')).trim(), first.toString('base64'));
  });

  it('gives processes starting at once the same key', async () => {
    const dataDir = await tempDir();
    const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateSecretsKeyFile(dataDir)));
    for (const key of keys) assert.deepEqual(key, keys[0]);
  });

  it('refuses a file that does not hold a key, naming the file', async () => {
    const dataDir = await tempDir();
    await writeFile(join(dataDir, SECRETS_KEY_FILE), 'not a key\n', { mode: 0o600 });
    await assert.rejects(
      loadOrCreateSecretsKeyFile(dataDir),
      (err) => err instanceof Error && err.message.includes(SECRETS_KEY_FILE),
    );
  });

  it('is the key of the server and the CLI only with the embedded database and no ALCARTA_SECRETS_KEY', async () => {
    const dataDir = await tempDir();
    const settings = await embeddedSecretsKeySettings(configWith({ ALCARTA_DATA_DIR: dataDir }));
    const fileKey = await loadOrCreateSecretsKeyFile(dataDir);
    assert.deepEqual(settings, { ALCARTA_SECRETS_KEY: fileKey.toString('base64') });
    const sealed = new SecretBox(configWith({ ALCARTA_DATA_DIR: dataDir, ...settings })).seal('hunter2');
    const again = await embeddedSecretsKeySettings(configWith({ ALCARTA_DATA_DIR: dataDir }));
    assert.equal(new SecretBox(configWith({ ALCARTA_DATA_DIR: dataDir, ...again })).open(sealed), 'hunter2');

    const otherDir = await tempDir();
    const withDatabase = { ALCARTA_DATA_DIR: otherDir, DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres' };
    assert.deepEqual(await embeddedSecretsKeySettings(configWith(withDatabase)), {});
    assert.deepEqual(
      await embeddedSecretsKeySettings(configWith({ ALCARTA_DATA_DIR: otherDir, ALCARTA_SECRETS_KEY: newKey() })),
      {},
    );
    await assert.rejects(stat(join(otherDir, SECRETS_KEY_FILE)), { code: 'ENOENT' });
  });
});
