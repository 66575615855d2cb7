/**
 * Per-key single flight: a ring while the key's work runs marks it to run once more, so a burst of
 * rings costs at most two runs, and never two at once. `at` is the earliest commit time of the
 * rings that are waiting, handed to the next run (for the wake latency metric).
 */
export class SingleFlight {
  private readonly running = new Map<string, { again: boolean; at: number | undefined; done?: Promise<void> }>();

  /** `failed` hears a run's error; the flight goes on (a ring during the failed run still runs). */
  constructor(private readonly failed: (err: unknown) => void) {}

  /** Keys whose work is running now. */
  get size(): number {
    return this.running.size;
  }

  /** Resolves when the key's work (with any run it still owes) is over; at once when none runs. */
  async settled(key: string): Promise<void> {
    await this.running.get(key)?.done;
  }

  ring(key: string, at: number | undefined, run: (at: number | undefined) => Promise<void>): void {
    const running = this.running.get(key);
    if (running) {
      running.again = true;
      running.at = earliest(running.at, at);
      return;
    }
    const state: { again: boolean; at: number | undefined; done?: Promise<void> } = { again: false, at };
    this.running.set(key, state);
    state.done = (async () => {
      do {
        const bellAt = state.at;
        state.again = false;
        state.at = undefined;
        await run(bellAt).catch((err) => this.failed(err));
      } while (state.again);
      this.running.delete(key);
    })();
  }
}

/** The earlier of two commit times, either of which may be unknown. */
export function earliest(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined ? b : b === undefined ? a : Math.min(a, b);
}
