import { Injectable } from '@nestjs/common';
import { createHash } from 'node:crypto';
import { randomBase62 } from '../common/ids';
import { ConsumedTicket, PersistedWaitRepository, TicketRefusal } from '../waits/persisted-wait.repository';

const TICKET_SHAPE = /^wst_[0-9A-Za-z]{43}$/;

/**
 * Single-use websocket tickets: `wst_` + 43 base62 characters (≈ 256 bits), carried in the
 * websocket URL, stored only as a SHA-256 hash, consumed by the one connection that opens the URL.
 */
@Injectable()
export class TicketService {
  constructor(private readonly waits: PersistedWaitRepository) {}

  issue(): { ticket: string; hash: string } {
    const ticket = `wst_${randomBase62(43)}`;
    return { ticket, hash: hashTicket(ticket) };
  }

  consume(ticket: string): Promise<ConsumedTicket | TicketRefusal> {
    if (!TICKET_SHAPE.test(ticket)) return Promise.resolve('ticket_invalid');
    return this.waits.consumeTicket(hashTicket(ticket));
  }
}

function hashTicket(ticket: string): string {
  return createHash('sha256').update(ticket, 'utf8').digest('hex');
}
