import { isIPv6 } from 'node:net';

/** Failed AUTH attempts one session may make; the last one closes it (421). */
export const MAX_FAILED_AUTHS = 5;
/** Unknown recipients (550 5.1.1) one session may name; the last one closes it (421). */
export const MAX_UNKNOWN_RECIPIENTS = 20;

/**
 * What each offence adds to its client's score: a session's whole allowance of guesses adds 1, and
 * being closed for them 1 more.
 */
const WEIGHTS = {
  failed_auth: 1 / MAX_FAILED_AUTHS,
  unknown_recipient: 1 / MAX_UNKNOWN_RECIPIENTS,
  closed: 1,
} as const;
export type Offence = keyof typeof WEIGHTS;

/** A score halves in this time without new offences. */
const HALF_LIFE_MS = 10 * 60_000;
/** Scores below this are forgotten. */
const FORGOTTEN_BELOW = 0.05;
/** From this score on, sessions are slowed: a greeting delay that doubles with each point. */
const SLOWED_FROM = 1;
/** The delay at score 2 (one session closed for guessing), and the most any session waits. */
const CLOSED_ONCE_DELAY_MS = 2000;
const MAX_DELAY_MS = 30_000;
/** A slowed client may hold this many sessions at once; more are refused (so delays do not overlap). */
const SESSIONS_PER_SLOWED_CLIENT = 2;
/**
 * Clients remembered at most: the least recently offending go first. Each costs a few hundred bytes,
 * so many addresses cannot exhaust memory, and one that offends keeps its place.
 */
const MAX_CLIENTS_REMEMBERED = 10_000;

/** What a new session gets: its greeting after `delayMs`, or a refusal (the client holds too many). */
export type Admission = { delayMs: number } | { refused: true };

/**
 * Throttling of guesses (tokens by AUTH, addresses by RCPT TO), per client: every failed guess adds
 * to the client's score, which decays (HALF_LIFE_MS). From SLOWED_FROM on, each new session of the
 * client waits before its greeting, longer as the score grows (capped at MAX_DELAY_MS), and a slowed
 * client may hold only SESSIONS_PER_SLOWED_CLIENT sessions at once, so parallel sessions do not
 * multiply its guesses. Clients are IPv4 addresses, or IPv6 /64 networks (one host usually has a
 * whole /64). In memory, per replica.
 */
export class GuessThrottle {
  /** Client → score and when it was last brought up to date; oldest offence first. */
  private readonly scores = new Map<string, { score: number; at: number }>();
  private readonly sessions = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  get remembered(): number {
    return this.scores.size;
  }

  /** A new session of `address`, if admitted (then `closed()` must follow when it ends). */
  admit(address: string): Admission {
    const client = clientOf(address);
    const score = this.scoreOf(client);
    const open = this.sessions.get(client) ?? 0;
    if (score >= SLOWED_FROM && open >= SESSIONS_PER_SLOWED_CLIENT) return { refused: true };
    this.sessions.set(client, open + 1);
    return { delayMs: delayFor(score) };
  }

  closed(address: string): void {
    const client = clientOf(address);
    const open = (this.sessions.get(client) ?? 1) - 1;
    if (open > 0) this.sessions.set(client, open);
    else this.sessions.delete(client);
  }

  offence(address: string, offence: Offence): void {
    const client = clientOf(address);
    const score = this.scoreOf(client) + WEIGHTS[offence];
    this.scores.delete(client);
    this.scores.set(client, { score, at: this.now() });
    if (this.scores.size > MAX_CLIENTS_REMEMBERED) this.scores.delete(this.scores.keys().next().value!);
  }

  private scoreOf(client: string): number {
    const entry = this.scores.get(client);
    if (!entry) return 0;
    const score = entry.score * 0.5 ** ((this.now() - entry.at) / HALF_LIFE_MS);
    if (score < FORGOTTEN_BELOW) this.scores.delete(client);
    return score;
  }
}

/** The greeting delay at `score`: none below SLOWED_FROM, then doubling per point up to MAX_DELAY_MS. */
export function delayFor(score: number): number {
  if (score < SLOWED_FROM) return 0;
  return Math.round(Math.min(MAX_DELAY_MS, CLOSED_ONCE_DELAY_MS * 2 ** (score - 2)));
}

/** The client an address belongs to: the address itself (IPv4), or its /64 network (IPv6). */
export function clientOf(address: string): string {
  if (!isIPv6(address) || address.includes('.')) return address;
  const [head, tail] = address.split('%')[0].split('::');
  const front = head ? head.split(':') : [];
  const back = tail ? tail.split(':') : [];
  const groups =
    tail === undefined ? front : [...front, ...Array<string>(8 - front.length - back.length).fill('0'), ...back];
  return `${groups
    .slice(0, 4)
    .map((g) => parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}
