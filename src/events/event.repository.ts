import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { deleteInBatches } from '../database/batched-delete';

/** Reads and deletes of the event log for its retention (appending is EventLog's). */
@Injectable()
export class EventRepository {
  constructor(@InjectDataSource() private readonly dataSource: DataSource) {}

  /**
   * When the oldest event written at `notBefore` or later was written; undefined when there is none.
   * One probe of the created_at index.
   */
  async oldestCreatedAt(notBefore = new Date(0)): Promise<Date | undefined> {
    const [row] = await this.dataSource.query<Array<{ oldest: Date | null }>>(
      `SELECT min(created_at) AS oldest FROM events WHERE created_at >= $1`,
      [notBefore],
    );
    return row.oldest ?? undefined;
  }

  /**
   * Deletes the events written in [from, to), in batches (safe on every replica at once); answers
   * how many. The lower bound keeps each batch's index scan from walking over the entries that
   * earlier windows left dead until vacuum.
   */
  deleteCreatedBetween(from: Date, to: Date): Promise<number> {
    return deleteInBatches(this.dataSource.manager, 'events', 'created_at >= $1 AND created_at < $2', [from, to]);
  }
}
