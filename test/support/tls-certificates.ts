import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The names every test certificate is valid for: what test servers listen on. */
const LOOPBACK_NAMES = 'subjectAltName=DNS:localhost,IP:127.0.0.1';

/** A certificate and its key as PEM files in `dir`, a temporary directory of their own (the caller removes it). */
export interface TestCertificate {
  dir: string;
  certFile: string;
  keyFile: string;
}

/**
 * A server certificate for 127.0.0.1 / localhost issued by a throwaway certificate authority,
 * as a private CA issues them: a client trusts it by trusting `caFile` (a Node process:
 * NODE_EXTRA_CA_CERTS=`caFile`, read once when the process starts).
 */
export interface TestCertificateAuthority extends TestCertificate {
  /** The CA's certificate (PEM); its key is deleted once the server certificate is signed. */
  caFile: string;
}

/**
 * A self-signed certificate for 127.0.0.1 / localhost in a new temporary directory: the
 * certificate is its own issuer, so a client trusts it by trusting `certFile` itself.
 */
export async function testCertificate(): Promise<TestCertificate> {
  const dir = await mkdtemp(join(tmpdir(), 'alcarta-tls-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  await selfSigned('/CN=localhost', [LOOPBACK_NAMES], keyFile, certFile);
  return { dir, certFile, keyFile };
}

/** A throwaway CA and a server certificate for 127.0.0.1 / localhost that it signed. */
export async function testCertificateAuthority(): Promise<TestCertificateAuthority> {
  const dir = await mkdtemp(join(tmpdir(), 'alcarta-tls-ca-'));
  const file = (name: string) => join(dir, name);
  await selfSigned(
    '/CN=Alcarta test CA',
    ['basicConstraints=critical,CA:TRUE', 'keyUsage=critical,keyCertSign,cRLSign'],
    file('ca-key.pem'),
    file('ca.pem'),
  );
  await openssl([
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/CN=localhost',
    '-keyout',
    file('key.pem'),
    '-out',
    file('server.csr'),
  ]);
  // `x509 -req` copies no extension from the request: the server's names go in an extension file.
  await writeFile(
    file('server.ext'),
    `${LOOPBACK_NAMES}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n`,
  );
  await openssl([
    'x509',
    '-req',
    '-in',
    file('server.csr'),
    '-CA',
    file('ca.pem'),
    '-CAkey',
    file('ca-key.pem'),
    '-CAcreateserial',
    '-days',
    '1',
    '-extfile',
    file('server.ext'),
    '-out',
    file('cert.pem'),
  ]);
  // Nothing else may be signed with it: only the CA's certificate stays.
  await rm(file('ca-key.pem'));
  return {
    dir,
    caFile: file('ca.pem'),
    certFile: file('cert.pem'),
    keyFile: file('key.pem'),
  };
}

/** A new RSA key and a self-signed certificate for a day, with `subject` and `extensions`. */
async function selfSigned(subject: string, extensions: string[], keyFile: string, certFile: string): Promise<void> {
  await openssl([
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '1',
    '-subj',
    subject,
    ...extensions.flatMap((extension) => ['-addext', extension]),
    '-keyout',
    keyFile,
    '-out',
    certFile,
  ]);
}

async function openssl(args: string[]): Promise<void> {
  await run('openssl', args, { timeout: 60_000 });
}
