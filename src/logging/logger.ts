import { LoggerService } from '@nestjs/common';
import pino, { Logger } from 'pino';

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
];

/** Bearer secrets and websocket tickets, wherever they appear inside a string. */
const SECRET_IN_TEXT = /\b(alc_|wst_)[0-9A-Za-z]{8,}/g;

export function scrubSecrets(text: string): string {
  return text.replace(SECRET_IN_TEXT, '$1[REDACTED]');
}

export function createRootLogger(level: string, destination: NodeJS.WritableStream = process.stdout): Logger {
  return pino(
    {
      level,
      base: { service: 'alcarta', pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      formatters: { level: (label) => ({ level: label }) },
      hooks: {
        logMethod(args, method) {
          method.apply(
            this,
            args.map((a) => (typeof a === 'string' ? scrubSecrets(a) : a)) as Parameters<typeof method>,
          );
        },
      },
    },
    destination as pino.DestinationStream,
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
