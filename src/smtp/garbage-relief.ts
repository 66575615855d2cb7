import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/**
 * A full garbage collection on demand. The runtime only offers it with --expose-gc, which this
 * turns on for the context it asks in (the process's own is untouched); undefined where it cannot.
 */
const collectGarbage: (() => void) | undefined = (() => {
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return undefined;
  }
})();

/** Collections at most this often, however fast messages go. */
const MIN_INTERVAL_MS = 100;

/**
 * Gives the memory of large messages back soon after they are done with. Parsing and storing a
 * message of 24 MiB leaves several times that in garbage (buffers joined, strings converted, the
 * query written), and V8 collects by heap growth, not by how much just became garbage: with memory
 * to spare it let the heap grow past 400 MiB before collecting while big messages went through one
 * after another. So once `threshold` bytes of messages have been released, a full collection runs
 * (at most every MIN_INTERVAL_MS, in the next turn of the event loop). Ordinary mail, a few KiB a
 * message, reaches the threshold rarely.
 */
export class GarbageRelief {
  private released = 0;
  private scheduled = false;
  private lastRun = 0;

  constructor(private readonly threshold: number) {}

  /** `bytes` of message data are garbage now. */
  release(bytes: number): void {
    this.released += bytes;
    if (this.released < this.threshold || this.scheduled || !collectGarbage) return;
    this.scheduled = true;
    const wait = Math.max(0, this.lastRun + MIN_INTERVAL_MS - Date.now());
    setTimeout(() => {
      this.scheduled = false;
      this.released = 0;
      this.lastRun = Date.now();
      collectGarbage();
    }, wait).unref();
  }
}
