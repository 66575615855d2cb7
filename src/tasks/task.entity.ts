import { Check, Column, Entity, Index, JoinColumn, OneToOne, PrimaryColumn } from 'typeorm';
import { bigintAsNumber } from '../database/column-transformers';
import { PersistedWaitEntity } from '../waits/persisted-wait.entity';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';
export const TASK_STATUSES: readonly TaskStatus[] = ['working', 'input_required', 'completed', 'failed', 'cancelled'];

export const TERMINAL_TASK_STATUSES: readonly TaskStatus[] = ['completed', 'failed', 'cancelled'];

@Entity({ name: 'tasks' })
@Check('tasks_status_check', `status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')`)
@Index('tasks_token_order', ['tokenId', 'createdAt', 'id'])
@Index('tasks_expiry', ['expiresAt'])
/** Working tasks per token, for the cap (partial; owned by the migration). */
@Index('tasks_working', { synchronize: false })
export class TaskEntity {
  /** Opaque and unguessable, and bound to the token anyway. */
  @PrimaryColumn({ type: 'text' })
  id: string;

  @Column({ name: 'token_id', type: 'text' })
  tokenId: string;

  /** The wait doing the work; null for a task that failed at creation (or after the wait was purged). */
  @Column({ name: 'wait_id', type: 'text', nullable: true, unique: true })
  waitId: string | null;

  @OneToOne(() => PersistedWaitEntity, { onDelete: 'SET NULL' })
  @JoinColumn({ name: 'wait_id', foreignKeyConstraintName: 'tasks_wait_id_fkey' })
  wait?: PersistedWaitEntity;

  @Column({ type: 'text' })
  status: TaskStatus;

  @Column({ name: 'status_message', type: 'text', nullable: true })
  statusMessage: string | null;

  /** The CallToolResult `tasks/result` returns, once terminal. */
  @Column({ type: 'jsonb', nullable: true })
  result: Record<string, unknown> | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'last_updated_at', type: 'timestamptz', default: () => 'now()' })
  lastUpdatedAt: Date;

  @Column({ name: 'ttl_ms', type: 'bigint', transformer: bigintAsNumber })
  ttlMs: number;

  @Column({ name: 'poll_interval_ms', type: 'integer' })
  pollIntervalMs: number;

  /** created_at + ttl: after this the task and its result are purged. */
  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
