import { LoggerService } from '@nestjs/common';
import pino, { Logger } from 'pino';
import { scrubSecrets } from './secret-masking';

/**
 * Paths pino censors before a line is written. Handlers never log credentials on purpose; this is
 * the second line of defence for the day someone logs a request or a token object wholesale.
 */
const REDACT_PATHS = [
  'secret',
  '*.secret',
  'token',
  '*.token',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'ticket',
  '*.ticket',
  'password',
  '*.password',
  'cookie',
  '*.cookie',
  'headers.cookie',
  '*.headers.cookie',
  'headers["set-cookie"]',
  '*.headers["set-cookie"]',
  'csrfToken',
  '*.csrfToken',
  'codeVerifier',
  '*.codeVerifier',
];

/** Longest SQL text and error message that a logged error keeps. */
const MAX_LOGGED_SQL = 500;
const MAX_LOGGED_MESSAGE = 1000;
const MAX_LOGGED_STACK = 4000;
/** Fields of an error that describe the failure without carrying data (`code`: 23505, ECONNREFUSED…). */
const ERROR_FIELDS = ['code', 'errno', 'syscall', 'severity', 'routine', 'status', 'statusCode'] as const;

/** Masks secrets first: a cut through a token would leave a part too short or too broken to recognise later. */
function truncate(text: string, max: number): string {
  const masked = scrubSecrets(text);
  return masked.length <= max ? masked : `${masked.slice(0, max)}… (${masked.length - max} more characters)`;
}

export interface LoggedError {
  type: string;
  message: string;
  stack?: string;
  query?: string;
  cause?: LoggedError;
  [field: string]: unknown;
}

/**
 * What a log line keeps of an error: its type, message, stack, a few descriptive codes and, for a
 * failed query, the SQL text (truncated). Never the query's parameters (TypeORM's
 * QueryFailedError carries all of them: one failed ingest logged the whole mail), nor any other
 * property a library hangs on an error (request bodies, PostgreSQL's `detail` with row values).
 */
export function serializeError(err: unknown, depth = 0): LoggedError {
  if (!(err instanceof Error)) return { type: typeof err, message: truncate(String(err), MAX_LOGGED_MESSAGE) };
  const e = err as Error & Record<string, unknown>;
  const out: LoggedError = { type: e.constructor?.name ?? 'Error', message: truncate(e.message, MAX_LOGGED_MESSAGE) };
  if (e.stack) out.stack = truncate(e.stack, MAX_LOGGED_STACK);
  for (const field of ERROR_FIELDS) {
    const value = e[field];
    if (typeof value === 'string' || typeof value === 'number') out[field] = value;
  }
  if (typeof e.query === 'string') out.query = truncate(e.query, MAX_LOGGED_SQL);
  const cause = e.driverError ?? e.cause;
  if (cause !== undefined && cause !== err && depth < 3) out.cause = serializeError(cause, depth + 1);
  return out;
}

/**
 * The last line of defence, applied to every serialized line just before it is written: masks any
 * secret that slipped into a message, a path, a nested field or one of Nest's own lines.
 */
export function scrubbingDestination(destination: NodeJS.WritableStream): pino.DestinationStream {
  return { write: (line: string) => destination.write(scrubSecrets(line)) };
}

export function createRootLogger(level: string, destination: NodeJS.WritableStream = process.stdout): Logger {
  return pino(
    {
      level,
      base: { service: 'alcarta', pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      serializers: { err: serializeError, error: serializeError },
      formatters: {
        level: (label) => ({ level: label }),
        // Errors under any other key get the same treatment as `err` and `error` (the serializers).
        log: (fields) => {
          for (const [key, value] of Object.entries(fields)) {
            if (value instanceof Error && key !== 'err' && key !== 'error') fields[key] = serializeError(value);
          }
          return fields;
        },
      },
      hooks: {
        logMethod(args, method) {
          method.apply(
            this,
            args.map((a) => (typeof a === 'string' ? scrubSecrets(a) : a)) as Parameters<typeof method>,
          );
        },
      },
    },
    scrubbingDestination(destination),
  );
}

/** Nest's start-up chatter (one line per module and route): useful when debugging, noise otherwise. */
const NEST_BOOT_CONTEXTS = new Set([
  'NestFactory',
  'InstanceLoader',
  'RoutesResolver',
  'RouterExplorer',
  'WebSocketsController',
  'NestApplication',
]);

/** Nest's logger interface on top of pino, so framework messages are JSON lines as well. */
export class PinoNestLogger implements LoggerService {
  constructor(private readonly logger: Logger) {}

  log(message: unknown, ...rest: unknown[]): void {
    this.write('info', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.write('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.write('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.write('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.write('trace', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]): void {
    this.write('fatal', message, rest);
  }

  private write(requested: pino.Level, message: unknown, rest: unknown[]): void {
    // Nest passes the context (the class name) as the last string argument, a stack before it.
    const context = typeof rest.at(-1) === 'string' ? (rest.at(-1) as string) : undefined;
    const level = requested === 'info' && context && NEST_BOOT_CONTEXTS.has(context) ? 'debug' : requested;
    const stack = rest.length > 1 && typeof rest[0] === 'string' ? rest[0] : undefined;
    const fields: Record<string, unknown> = { context };
    if (stack) fields.stack = scrubSecrets(stack);
    if (message instanceof Error) {
      this.logger[level]({ ...fields, err: message }, message.message);
    } else if (typeof message === 'object' && message !== null) {
      this.logger[level]({ ...fields, ...message });
    } else {
      this.logger[level](fields, String(message));
    }
  }
}
