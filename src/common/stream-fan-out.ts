import { PassThrough, Readable } from 'node:stream';

/**
 * Feeds one stream to `count` readers at once, without copying or holding chunks: the source waits
 * for the slowest reader (backpressure), so each only holds what its own buffer does. A reader that
 * is destroyed (it gave up on the content) is left out from then on and holds nobody up. The source
 * ending ends the readers; the source failing, or closing before its end, destroys them.
 */
export function fanOut(source: Readable, count: number): PassThrough[] {
  const readers = Array.from({ length: count }, () => new PassThrough());
  source.on('data', (chunk: Buffer) => {
    let blocked = 0;
    for (const reader of readers) {
      if (reader.destroyed || reader.write(chunk)) continue;
      blocked++;
      const release = () => {
        reader.off('drain', release);
        reader.off('close', release);
        if (--blocked === 0) source.resume();
      };
      reader.on('drain', release);
      reader.on('close', release);
    }
    if (blocked > 0) source.pause();
  });
  source.once('end', () => {
    for (const reader of readers) if (!reader.destroyed) reader.end();
  });
  // The readers carry the failure on; 'close' also covers a source destroyed without an error.
  source.on('error', () => undefined);
  source.once('close', () => {
    if (source.readableEnded) return;
    const failure = source.errored ?? new Error('The stream closed before its end');
    for (const reader of readers) reader.destroy(failure);
  });
  return readers;
}
