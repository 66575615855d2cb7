/**
 * The server-wide allowance of message bytes in flight (ALCARTA_SMTP_MAX_BYTES_IN_FLIGHT): what
 * SMTP messages being received, parsed or stored hold in memory, counted by the bytes received. A
 * message takes bytes as they arrive and gives them all back once it is stored or refused.
 */
export class ByteBudget {
  private used = 0;

  constructor(readonly limit: number) {}

  get inFlight(): number {
    return this.used;
  }

  /** Whether `bytes` more would fit now (a sender's declared SIZE). */
  fits(bytes: number): boolean {
    return this.used + bytes <= this.limit;
  }

  /** Takes `bytes` if they fit; false (and nothing taken) if they do not. */
  tryTake(bytes: number): boolean {
    if (!this.fits(bytes)) return false;
    this.used += bytes;
    return true;
  }

  give(bytes: number): void {
    this.used = Math.max(0, this.used - bytes);
  }
}

/**
 * Messages in their last, most memory-hungry step at once, by size: the parser turning a message's
 * text into strings, then the message being written to the database (several copies of its text
 * for a moment each). At most `capacity` bytes of messages pass at once, in arrival order, and
 * always at least one, so that a burst of small messages still shares a commit while large ones go
 * one by one.
 */
export class FinishingGate {
  private used = 0;
  private readonly waiting: Array<{ bytes: number; enter: () => void }> = [];

  constructor(readonly capacity: number) {}

  /** Resolves once the message may finish, with the function that lets the next one in. */
  enter(bytes: number): Promise<() => void> {
    return new Promise((resolve) => {
      this.waiting.push({
        bytes,
        enter: () => {
          let left = false;
          resolve(() => {
            if (left) return;
            left = true;
            this.used -= bytes;
            this.admit();
          });
        },
      });
      this.admit();
    });
  }

  private admit(): void {
    while (this.waiting.length > 0 && (this.used === 0 || this.used + this.waiting[0].bytes <= this.capacity)) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.enter();
    }
  }
}
