import { Injectable } from '@nestjs/common';

/**
 * Whether this replica is shutting down. Once draining begins (SIGTERM/SIGINT) readiness fails at
 * once so the load balancer stops sending traffic, and everything subscribed (the wait engine)
 * answers its clients so they reconnect to another replica.
 */
@Injectable()
export class DrainState {
  private draining = false;
  private readonly subscribers: Array<() => void | Promise<void>> = [];
  private done: Promise<void> | undefined;

  get isDraining(): boolean {
    return this.draining;
  }

  /** `subscriber` runs when draining begins; a promise it returns delays `begin()`'s. */
  onDrain(subscriber: () => void | Promise<void>): void {
    this.subscribers.push(subscriber);
  }

  begin(): Promise<void> {
    if (!this.draining) {
      this.draining = true;
      this.done = Promise.all(this.subscribers.map(async (s) => s())).then(() => undefined);
    }
    return this.done!;
  }
}
