import { randomBytes } from 'node:crypto';
import { chmod, link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AppConfig } from '../config/app-config';

const KEY_BYTES = 32;
export const SECRETS_KEY_FILE = 'secrets.key';

/**
 * The ALCARTA_SECRETS_KEY to add to the server's or the CLI's settings: with the embedded
 * PostgreSQL and no key set, the key kept beside the cluster in `<ALCARTA_DATA_DIR>/secrets.key`
 * (made on first use), so that `npm start` connects mailboxes without set-up and the CLI reads what
 * the server sealed. With DATABASE_URL the operator's key is the only one: a key made on one replica
 * would be unknown to the others. Empty when nothing is to be added.
 */
export async function embeddedSecretsKeySettings(config: AppConfig): Promise<Record<string, string>> {
  if (config.secretsKey || config.databaseUrl) return {};
  const key = await loadOrCreateSecretsKeyFile(config.dataDir);
  return { ALCARTA_SECRETS_KEY: key.toString('base64') };
}

/**
 * Reads the key file of `dataDir`, or creates it (32 random bytes in base64, mode 0600). Creation is
 * atomic (a complete temporary file is hard-linked to the name), so a server and a CLI starting at
 * once end up with the same key and never read a half-written file.
 */
export async function loadOrCreateSecretsKeyFile(dataDir: string): Promise<Buffer> {
  const file = join(dataDir, SECRETS_KEY_FILE);
  try {
    return await readKeyFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(temporary, `${randomBytes(KEY_BYTES).toString('base64')}\n`, { mode: 0o600, flag: 'wx' });
  try {
    // The umask can only remove permissions, but the file must be exactly owner-only.
    await chmod(temporary, 0o600);
    await link(temporary, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await unlink(temporary);
  }
  return readKeyFile(file);
}

async function readKeyFile(file: string): Promise<Buffer> {
  const text = (await readFile(file, 'utf8')).trim();
  const key = Buffer.from(text, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || key.length !== KEY_BYTES) {
    throw new Error(`${file} must hold ${KEY_BYTES} bytes in base64 (the key of the connected mailboxes' secrets)`);
  }
  return key;
}
