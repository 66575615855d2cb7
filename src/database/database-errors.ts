import { QueryRunnerAlreadyReleasedError, QueryRunnerProviderAlreadyReleasedError } from 'typeorm';
import { AlcartaError } from '../kernel/errors';

/**
 * What a failed database call means for the client that caused it. The services prevent these
 * errors where they can (input is checked before it reaches SQL); this is the backstop that keeps
 * the rest from becoming a 500 or a JSON-RPC internal error:
 *  - `unavailable`: PostgreSQL cannot be reached, is shutting down or restarting, failed over, or
 *    dropped the connection mid-call → 503 with Retry-After (a tool error `unavailable` in MCP);
 *  - `invalid_input`: the value itself cannot be stored (a NUL byte, a row too big for an index,
 *    too many bind parameters) → 400 invalid_request.
 * Anything else is a bug of ours and stays a 500 (logged without query parameters).
 *
 * A success is only ever answered after COMMIT returned. A connection lost during COMMIT itself
 * leaves the outcome unknown: the change may be stored although the answer is `unavailable`, and a
 * client that retries a create may then make a second one.
 */
export type DatabaseFailure = 'unavailable' | 'invalid_input';

/** Connection-level failures of `pg`, the network and Node's streams, before PostgreSQL answered anything. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  // A query written to a socket that is closing or closed.
  'ERR_STREAM_DESTROYED',
  'ERR_STREAM_WRITE_AFTER_END',
]);

/**
 * SQLSTATEs of a server that cannot serve the session any more, whatever the statement:
 * 57P01-57P03 admin shutdown (a fast or smart stop, pg_terminate_backend), crash shutdown
 * (an immediate stop, a crashed backend), cannot connect now (starting up, recovering);
 * 53300 too many connections; 25006 a write reaching a server that became a standby (failover).
 * Class 08 (connection exception) is matched by its prefix.
 */
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '25006']);

/** Messages `pg` and its pool use when a connection is lost or cannot be had in time (they carry no code). */
const CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  // pg's Client when its own connect timeout (CONNECT_TIMEOUT_MS) destroys the socket.
  'timeout expired',
  'Client has encountered a connection error',
  'Cannot use a pool after calling end',
  'Client was closed and is not queryable',
  'the database system is',
];

/**
 * TypeORM's errors for a query runner whose connection was released under it: a connection that
 * failed (PostgreSQL closed it) is released by TypeORM at once, and the next statement of the
 * same transaction or query runner fails with one of these instead of a pg error.
 */
function isReleasedQueryRunner(e: unknown): boolean {
  return e instanceof QueryRunnerAlreadyReleasedError || e instanceof QueryRunnerProviderAlreadyReleasedError;
}

export function classifyDatabaseError(err: unknown): DatabaseFailure | undefined {
  const chain: unknown[] = [];
  for (let e: unknown = err, depth = 0; e && depth < 5; depth++) {
    chain.push(e);
    e = (e as { driverError?: unknown; cause?: unknown }).driverError ?? (e as { cause?: unknown }).cause;
  }
  for (const e of chain) {
    if (isReleasedQueryRunner(e)) return 'unavailable';
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (NETWORK_CODES.has(code)) return 'unavailable';
      // A protocol violation is a statement PostgreSQL refused to bind (more than 65535 parameters).
      if (code === '08P01') return 'invalid_input';
      if (code.startsWith('08') || UNAVAILABLE_STATES.has(code)) return 'unavailable';
      // 22: data exception (NUL byte 22P05/22021, value too long 22001); 54: program limit exceeded
      // (index row size, too many bind parameters).
      if (code.startsWith('22') || code.startsWith('54')) return 'invalid_input';
    }
    const message = (e as { message?: unknown }).message;
    if (typeof message === 'string' && CONNECTION_MESSAGES.some((m) => message.includes(m))) return 'unavailable';
  }
  return undefined;
}

/**
 * The client-facing error for a classified database failure (REST body, MCP tool error), or
 * undefined for anything else.
 */
export function databaseFailureError(err: unknown): AlcartaError | undefined {
  switch (classifyDatabaseError(err)) {
    case 'unavailable':
      return new AlcartaError('unavailable', 'database_unavailable', 'The database is unreachable; retry shortly.');
    case 'invalid_input':
      return new AlcartaError('invalid_request', 'invalid_input', 'A value in this request cannot be stored.');
    default:
      return undefined;
  }
}

/**
 * What a failure means for the client, at every edge that answers one (REST, MCP tool results,
 * JSON-RPC errors, websockets): an AlcartaError as it is, a database failure as its AlcartaError,
 * or undefined for an unexpected failure (a bug: log it, answer a generic error).
 */
export function clientFacingError(err: unknown): AlcartaError | undefined {
  return err instanceof AlcartaError ? err : databaseFailureError(err);
}
