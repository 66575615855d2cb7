import { ValueTransformer } from 'typeorm';

/**
 * `pg` returns bigint as a string to avoid precision loss; our bigints are counters that stay far
 * below 2^53, so numbers are safe and easier to use.
 */
export const bigintAsNumber: ValueTransformer = {
  to: (value: number | undefined) => value,
  from: (value: string | null) => (value === null ? null : Number(value)),
};
