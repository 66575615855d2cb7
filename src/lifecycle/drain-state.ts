import { Injectable } from '@nestjs/common';

/**
 * Whether this replica is shutting down. Once draining begins (SIGTERM/SIGINT) readiness fails at
 * once so the load balancer stops sending traffic, and everything subscribed (the wait engine)
 * answers its clients so they reconnect to another replica.
 */
@Injectable()
export class DrainState {
  private draining = false;
  private readonly subscribers: Array<() => void> = [];

  get isDraining(): boolean {
    return this.draining;
  }

  onDrain(subscriber: () => void): void {
    this.subscribers.push(subscriber);
  }

  begin(): void {
    if (this.draining) return;
    this.draining = true;
    for (const subscriber of this.subscribers) subscriber();
  }
}
