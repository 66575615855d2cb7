import { Logger } from '@nestjs/common';
import { AlcartaError, identityProviderUnavailable } from '../../kernel/errors';

/**
 * The identity provider's last failed fetch (issuer metadata or key set: a network error, a
 * timeout, a status other than 2xx, a body that is not what it should be), remembered for a
 * backoff. Meanwhile nothing is fetched from the provider: a request that needs a fetch is refused
 * at once with identity_provider_unavailable instead of waiting for a timeout of its own, so an
 * outage of the provider neither ties up every JWT request for seconds nor becomes a flood of
 * fetches. The first request after the backoff tries again.
 */
export class IdentityProviderOutage {
  private readonly logger = new Logger('OAuth');
  private retryAt = 0;

  constructor(private readonly backoffMs: number) {}

  /** Whether a failure is remembered now: no fetch may be tried. */
  get ongoing(): boolean {
    return Date.now() < this.retryAt;
  }

  /** Remembers a failed fetch of `what` (logged: at most once per backoff, as fetches are). */
  failed(what: string, failure: string): void {
    this.retryAt = Date.now() + this.backoffMs;
    this.logger.warn(
      `Fetching ${what} from the identity provider failed (${failure}); JWT requests that need it answer 503 identity_provider_unavailable for ${Math.round(this.backoffMs / 1000)} s.`,
    );
  }

  /** The refusal, with the seconds until the provider is asked again. */
  unavailable(): AlcartaError {
    return identityProviderUnavailable(Math.max(1, Math.ceil((this.retryAt - Date.now()) / 1000)));
  }
}
