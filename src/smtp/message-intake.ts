import { PassThrough, Readable } from 'node:stream';
import { ByteBudget, FinishingGate } from './byte-budget';
import { GarbageRelief } from './garbage-relief';
import { SmtpRefusal } from './smtp-refusal';

/** The reply when the budget of bytes in flight is spent (RFC 3463 4.3.1: mail system full). */
export function budgetSpent(): SmtpRefusal {
  return new SmtpRefusal(452, 'server_busy', '4.3.1 Too much mail in flight on this server; try again later');
}

/**
 * One message's DATA as it arrives: every chunk is taken from the server-wide budget of bytes in
 * flight, then passed on to `body` (what the message is parsed and checked from) at the pace body is
 * read, so the socket waits while the parser is busy. Past the size limit, or when the budget runs
 * out, the intake gives up on the message: body fails with the refusal, the bytes go back at once,
 * and the rest of DATA is read and dropped (smtp-server answers only once DATA has ended). A client
 * that leaves mid-DATA fails body with its error. Otherwise the bytes stay taken until `release()`,
 * once the message is stored or refused, and the end of DATA reaches the parser only when the
 * FinishingGate lets the message finish.
 */
export class MessageIntake {
  readonly body = new PassThrough();
  private received = 0;
  private taken = 0;
  private refusal: SmtpRefusal | undefined;
  private released = false;
  private leaveGate: (() => void) | undefined;

  constructor(
    private readonly data: Readable,
    private readonly budget: ByteBudget,
    private readonly gate: FinishingGate,
    private readonly relief: GarbageRelief,
    private readonly maxBytes: number,
  ) {
    data.on('data', (chunk: Buffer) => this.receive(chunk));
    data.once('end', () => void this.finish());
    data.once('error', (err) => this.body.destroy(err));
    // Whoever reads the body may let go of it early (a reader that failed destroys it): the rest of
    // DATA must still be read and dropped, or a pause waiting for the body's 'drain' would last
    // forever and the client would never get its reply.
    this.body.once('close', () => this.data.resume());
  }

  /** Why the intake gave up on the message, if it did. */
  get refused(): SmtpRefusal | undefined {
    return this.refusal;
  }

  /**
   * The message is parsed: the bytes it came in as are garbage now. They stay taken (the parsed
   * message holds about as much until it is stored), but their memory is given back at once.
   */
  parsed(): void {
    this.relief.release(this.taken, false);
  }

  /** Gives the bytes back and lets the next message finish: the message is stored or refused. */
  release(): void {
    this.released = true;
    this.giveBack();
    this.leaveGate?.();
    // Whatever is still to come of DATA is read and dropped.
    this.data.resume();
  }

  /** All of DATA is in: the end reaches the parser once the message may finish (FinishingGate). */
  private async finish(): Promise<void> {
    if (this.refusal || this.released || this.body.destroyed) return;
    this.leaveGate = await this.gate.enter(this.received);
    if (this.released || this.body.destroyed) return this.leaveGate();
    this.body.end();
  }

  private receive(chunk: Buffer): void {
    if (this.refusal || this.released || this.body.destroyed) return;
    this.received += chunk.length;
    if (this.received > this.maxBytes) {
      return this.giveUp(new SmtpRefusal(552, 'too_large', 'Message exceeds the size limit'));
    }
    if (!this.budget.tryTake(chunk.length)) return this.giveUp(budgetSpent());
    this.taken += chunk.length;
    if (!this.body.write(chunk)) {
      this.data.pause();
      this.body.once('drain', () => this.data.resume());
    }
  }

  private giveBack(): void {
    this.budget.give(this.taken);
    this.relief.release(this.taken, this.budget.inFlight === 0);
    this.taken = 0;
  }

  private giveUp(refusal: SmtpRefusal): void {
    this.refusal = refusal;
    this.giveBack();
    this.body.destroy(refusal);
    this.data.resume();
  }
}
