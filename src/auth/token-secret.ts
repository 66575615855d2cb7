import { createHash } from 'node:crypto';
import { randomBase62 } from '../common/ids';

/** 48 base62 characters ≈ 285 bits, above the 256 bits a token secret must carry (docs/security.md). */
const SECRET_LENGTH = 48;

export const SECRET_SHAPE = /^alc_[0-9A-Za-z]{43,}$/;

export function generateSecret(): string {
  return `alc_${randomBase62(SECRET_LENGTH)}`;
}

/**
 * Secrets are high-entropy random strings, so a plain SHA-256 is enough to make a leaked table
 * useless (no dictionary to try) while keeping the lookup on every request a single index probe.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}
