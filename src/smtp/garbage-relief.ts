import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full garbage collection on demand. The runtime only offers it with --expose-gc, which this
 * turns on for the context it asks in (the process's own is untouched); undefined where it cannot.
 */
const collectGarbage: ((options?: GcOptions) => void) | undefined = (() => {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as (options?: GcOptions) => void;
  } catch {
    return undefined;
  }
})();

/**
 * V8's gc() options: the `last-resort` flavor also compacts the heap and gives its free pages back
 * to the system (V8 12 and later, Node 22 and later). Older versions do not collect fully with
 * options: a plain gc() always runs first.
 */
interface GcOptions {
  type: 'major';
  execution: 'sync';
  flavor: 'last-resort';
}

type Collection = 'regular' | 'compacting';

/** Collections at most this often, however fast messages go. */
const MIN_INTERVAL_MS = 100;

/**
 * Gives the memory of large messages back soon after they are done with. Parsing and storing a
 * message of 24 MiB leaves several times that in garbage (buffers joined, strings converted, the
 * query written), and V8 collects by heap growth, not by how much just became garbage: with memory
 * to spare it let the heap grow past 400 MiB before collecting while big messages went through one
 * after another. So once `threshold` bytes of messages have been released, a full collection runs
 * (at most every MIN_INTERVAL_MS, in the next turn of the event loop). Ordinary mail, a few KiB a
 * message, reaches the threshold rarely. When the last message in flight is done after such a run,
 * one more collection compacts the heap, so the process shrinks back once the burst is over.
 */
export class GarbageRelief {
  private released = 0;
  private scheduled = false;
  private compact = false;
  /** When the last collection ran; 0 when none ran since the heap was last compacted. */
  private lastRun = 0;

  constructor(private readonly threshold: number) {}

  /** `bytes` of message data are garbage now; `idle`: no message is in flight any more. */
  release(bytes: number, idle: boolean): void {
    this.released += bytes;
    if (this.released >= this.threshold) this.schedule('regular');
    if (idle && this.lastRun > 0) this.schedule('compacting');
  }

  private schedule(collection: Collection): void {
    if (!collectGarbage) return;
    if (collection === 'compacting') this.compact = true;
    if (this.scheduled) return;
    this.scheduled = true;
    const run = () => {
      const compact = this.compact;
      this.scheduled = false;
      this.compact = false;
      this.released = 0;
      // After compacting, the next burst starts afresh (lastRun 0: no compaction until a regular run).
      this.lastRun = compact ? 0 : Date.now();
      collectGarbage();
      if (compact) collectGarbage({ type: 'major', execution: 'sync', flavor: 'last-resort' });
    };
    // As soon as what was released is unreachable (the callbacks running now let go of it), and before
    // the next large allocation: a parsed message is written to the database a few round trips later.
    const wait = this.lastRun + MIN_INTERVAL_MS - Date.now();
    if (wait > 0) setTimeout(run, wait).unref();
    else setImmediate(run).unref();
  }
}
