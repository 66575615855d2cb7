import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { AppConfig } from '../config/app-config';
import { invalidRequest } from '../kernel/errors';

const VERSION = 'v1';
const ALGORITHM = 'aes-256-gcm';
/** NIST SP 800-38D's recommended GCM nonce length; random per seal, so a key may seal ~2^32 values. */
const IV_BYTES = 12;
/** Fixed, because Node otherwise accepts a shortened tag, which would weaken the integrity check. */
const TAG_BYTES = 16;

/** A sealed secret that cannot be opened: altered, malformed, or sealed with a key we do not have. */
export class UnreadableSecret extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnreadableSecret';
  }
}

/** The first 8 hex characters of SHA-256 of the key: names the key in a sealed value without revealing it. */
export function secretsKeyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

interface Key {
  id: string;
  bytes: Buffer;
}

/**
 * Encrypts the secrets of connected mailboxes at rest with AES-256-GCM under ALCARTA_SECRETS_KEY.
 * A sealed value is `v1.<key id>.<iv>.<ciphertext>.<tag>` (base64url parts): the key id says which
 * key sealed it, so after a rotation values sealed with ALCARTA_SECRETS_KEY_PREVIOUS still open and
 * can be recognised for sealing again. The version and key id are authenticated data, so no part of
 * a sealed value can be changed without opening failing.
 */
@Injectable()
export class SecretBox {
  // Private fields: util.inspect and JSON.stringify never show them, so a logged SecretBox shows no key.
  readonly #current: Key | undefined;
  readonly #previous: Key | undefined;

  constructor(config: AppConfig) {
    this.#current = config.secretsKey && { id: secretsKeyId(config.secretsKey), bytes: config.secretsKey };
    this.#previous = config.previousSecretsKey && {
      id: secretsKeyId(config.previousSecretsKey),
      bytes: config.previousSecretsKey,
    };
  }

  /** Whether secrets can be sealed at all (ALCARTA_SECRETS_KEY, or the embedded database's key file). */
  get available(): boolean {
    return this.#current !== undefined;
  }

  seal(plaintext: string): string {
    const key = this.#requireCurrent();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, key.bytes, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(associatedData(key.id));
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, key.id, iv, ciphertext, cipher.getAuthTag()]
      .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
      .join('.');
  }

  open(sealed: string): string {
    const current = this.#requireCurrent();
    const parts = parseSealed(sealed);
    const key = [current, this.#previous].find((candidate) => candidate?.id === parts.keyId);
    if (!key) {
      throw new UnreadableSecret(
        `a secret was sealed with key ${parts.keyId}, which is neither ALCARTA_SECRETS_KEY (${current.id})` +
          (this.#previous ? ` nor ALCARTA_SECRETS_KEY_PREVIOUS (${this.#previous.id})` : '') +
          '; set the key it was sealed with as ALCARTA_SECRETS_KEY_PREVIOUS',
      );
    }
    const decipher = createDecipheriv(ALGORITHM, key.bytes, parts.iv, { authTagLength: TAG_BYTES });
    decipher.setAAD(associatedData(key.id));
    decipher.setAuthTag(parts.tag);
    try {
      return Buffer.concat([decipher.update(parts.ciphertext), decipher.final()]).toString('utf8');
    } catch {
      throw new UnreadableSecret(`a secret sealed with key ${key.id} failed its integrity check: it was altered`);
    }
  }

  /** Whether `sealed` was sealed with the previous key, and should be sealed again with the current one. */
  needsResealing(sealed: string): boolean {
    const { keyId } = parseSealed(sealed);
    return this.#previous !== undefined && keyId === this.#previous.id && keyId !== this.#current?.id;
  }

  /**
   * Keys for another use than sealing (`purpose`, e.g. signing audit checkpoints), derived from the
   * current and the previous key with HKDF-SHA256, so one configured secret serves both without a
   * derived key revealing anything about the sealing key. Each keeps the id of the key it came from.
   */
  derivedKeys(purpose: string): Array<{ id: string; bytes: Buffer }> {
    return [this.#current, this.#previous].flatMap((key) =>
      key ? [{ id: key.id, bytes: Buffer.from(hkdfSync('sha256', key.bytes, Buffer.alloc(0), purpose, 32)) }] : [],
    );
  }

  #requireCurrent(): Key {
    if (!this.#current) {
      throw invalidRequest(
        'secrets_key_missing',
        'Connected mailboxes need ALCARTA_SECRETS_KEY to encrypt their credentials: set it to 32 random bytes ' +
          'in base64 (openssl rand -base64 32) and restart the server',
      );
    }
    return this.#current;
  }
}

function associatedData(keyId: string): Buffer {
  return Buffer.from(`${VERSION}.${keyId}`, 'ascii');
}

interface SealedParts {
  keyId: string;
  iv: Buffer;
  ciphertext: Buffer;
  tag: Buffer;
}

function parseSealed(sealed: string): SealedParts {
  const parts = sealed.split('.');
  if (parts.length !== 5 || parts[0] !== VERSION || !/^[0-9a-f]{8}$/.test(parts[1])) {
    throw new UnreadableSecret(`not a sealed secret (expected ${VERSION}.<key id>.<iv>.<ciphertext>.<tag>)`);
  }
  const [iv, ciphertext, tag] = parts.slice(2).map(decodeBase64Url);
  if (iv?.length !== IV_BYTES || tag?.length !== TAG_BYTES || !ciphertext) {
    throw new UnreadableSecret('a sealed secret is malformed: its iv or tag has the wrong length');
  }
  return { keyId: parts[1], iv, ciphertext, tag };
}

/**
 * Base64url in its one canonical spelling, or undefined: Buffer.from skips characters outside the
 * alphabet and ignores the unused low bits of the last character, so a changed character could
 * otherwise decode to the same bytes and an altered value would go unnoticed.
 */
function decodeBase64Url(text: string): Buffer | undefined {
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
}
