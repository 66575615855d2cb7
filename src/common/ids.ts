import { randomInt } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Uniformly random base62 text from the CSPRNG (each character carries log2(62) ≈ 5.95 bits). */
export function randomBase62(length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE62[randomInt(62)];
  return out;
}

export type IdPrefix = 'tok' | 'mbx' | 'msg' | 'chk' | 'thr' | 'wt' | 'task' | 'grt' | 'whk' | 'whd';

/**
 * Public ids are a type prefix and 22 random base62 characters (≈ 131 bits): unguessable, so an id
 * reveals nothing about other rows and cannot be enumerated.
 */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(22)}`;
}

export function hasIdShape(value: string, prefix: IdPrefix): boolean {
  return value.startsWith(`${prefix}_`) && /^[a-z]+_[0-9A-Za-z]{1,64}$/.test(value);
}
