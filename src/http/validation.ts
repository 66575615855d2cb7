import { PipeTransform, ValidationError, ValidationPipe } from '@nestjs/common';
import { plainToInstance } from 'class-transformer';
import { validate } from 'class-validator';
import { AlcartaError, invalidRequest, notFound } from '../kernel/errors';
import { hasIdShape, IdPrefix } from '../common/ids';

const VALIDATOR_OPTIONS = { whitelist: true, forbidNonWhitelisted: true, forbidUnknownValues: true };

/**
 * Turns class-validator's findings into one specific error: which field, and whether it is missing,
 * not allowed, or has a wrong value. The first problem is the reason; the message lists all of them.
 */
export function validationError(errors: ValidationError[]): AlcartaError {
  const flat = flatten(errors);
  if (flat.length === 0) return invalidRequest('invalid_body', 'The request body must be a JSON object.');
  const [first] = flat;
  const reason = first.constraints.whitelistValidation
    ? 'unknown_field'
    : first.value === undefined || first.value === null
      ? 'missing_field'
      : 'invalid_field';
  const message = flat
    .map((e) =>
      e.constraints.whitelistValidation ? `${e.path} is not a known field` : Object.values(e.constraints).join('; '),
    )
    .join('; ');
  return invalidRequest(reason, message, { field: first.path });
}

interface FlatError {
  path: string;
  value: unknown;
  constraints: Record<string, string>;
}

function flatten(errors: ValidationError[], prefix = ''): FlatError[] {
  return errors.flatMap((e) => {
    const path = prefix ? `${prefix}.${e.property}` : e.property;
    const own = e.constraints ? [{ path, value: e.value as unknown, constraints: e.constraints }] : [];
    return [...own, ...flatten(e.children ?? [], path)];
  });
}

export function createValidationPipe(): ValidationPipe {
  return new ValidationPipe({
    ...VALIDATOR_OPTIONS,
    transform: true,
    exceptionFactory: (errors) => validationError(errors),
  });
}

/** For handlers whose body type depends on the request (JSON or raw), validated the same way. */
export async function validateBody<T extends object>(cls: new () => T, body: unknown): Promise<T> {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || Buffer.isBuffer(body)) {
    throw invalidRequest('invalid_body', 'The request body must be a JSON object.');
  }
  const instance = plainToInstance(cls, body);
  const errors = await validate(instance, VALIDATOR_OPTIONS);
  if (errors.length > 0) throw validationError(errors);
  return instance;
}

/**
 * For an id in a URL path: one that cannot name anything (another prefix, a NUL, `..`, over-long)
 * is `not_found` at once, without a query, exactly like an unknown id of the right shape.
 */
export class PathId implements PipeTransform<string, string> {
  constructor(
    private readonly prefix: IdPrefix,
    private readonly kind: Parameters<typeof notFound>[0],
  ) {}

  transform(value: string): string {
    if (!hasIdShape(value, this.prefix)) throw notFound(this.kind, value);
    return value;
  }
}
