import { Caller } from '../auth/caller';
import { RequestState } from '../approvals/approval-request.entity';
import { MessageCursor } from '../mail/message-cursor';

/** What a message wait watches: which mailboxes, from which position, with which filters. */
export interface MessageWaitSpec {
  kind: 'message';
  caller: Caller;
  /** One mailbox, or undefined for every mailbox the token may read. */
  mailboxId: string | undefined;
  /** Where to start; undefined means "after the newest message at the start of the wait". */
  since: MessageCursor | undefined;
  /** Lower-cased sender address to match exactly, if any. */
  from: string | undefined;
  /** Lower-cased substring the subject must contain, if any. */
  subjectContains: string | undefined;
  timeoutMs: number;
}

/** What a request wait watches: the listed requests, until one is in one of `states`. */
export interface RequestWaitSpec {
  kind: 'request';
  caller: Caller;
  requestIds: string[];
  states: ReadonlySet<RequestState>;
  timeoutMs: number;
}

export type WaitSpec = MessageWaitSpec | RequestWaitSpec;

/** The poll result of SPEC §4 (the same object websocket delivery and tasks will carry). */
export interface WaitResult {
  matched: boolean;
  timed_out: boolean;
  shutdown: boolean;
  events: object[];
  next_cursor?: string;
  requests?: Array<{ request_id: string; state: RequestState }>;
}
