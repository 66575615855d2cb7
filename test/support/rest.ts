import { recordSecret } from './test-logs';

export interface RestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** A small REST client for the tests: JSON in, JSON out, bearer token attached. */
export class RestClient {
  constructor(
    readonly baseUrl: string,
    readonly token?: string,
  ) {}

  withToken(token: string | undefined): RestClient {
    return new RestClient(this.baseUrl, token);
  }

  get<T = any>(path: string): Promise<RestResponse<T>> {
    return this.request('GET', path);
  }

  post<T = any>(path: string, body?: unknown): Promise<RestResponse<T>> {
    return this.request('POST', path, body);
  }

  put<T = any>(path: string, body?: unknown): Promise<RestResponse<T>> {
    return this.request('PUT', path, body);
  }

  patch<T = any>(path: string, body?: unknown): Promise<RestResponse<T>> {
    return this.request('PATCH', path, body);
  }

  delete<T = any>(path: string): Promise<RestResponse<T>> {
    return this.request('DELETE', path);
  }

  /** Sends a body verbatim with the given content type (raw RFC 5322, malformed JSON, …). */
  async raw<T = any>(
    method: string,
    path: string,
    body: string | Buffer,
    contentType: string,
  ): Promise<RestResponse<T>> {
    return this.send(method, path, { 'content-type': contentType }, body);
  }

  async request<T = any>(method: string, path: string, body?: unknown): Promise<RestResponse<T>> {
    return body === undefined
      ? this.send(method, path, {}, undefined)
      : this.send(method, path, { 'content-type': 'application/json' }, JSON.stringify(body));
  }

  private async send<T>(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | Buffer | undefined,
  ): Promise<RestResponse<T>> {
    const res = await fetch(this.baseUrl + path, {
      method,
      headers: { ...headers, ...(this.token ? { authorization: `Bearer ${this.token}` } : {}) },
      body,
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // leave as text
    }
    const secret = (parsed as { secret?: unknown } | undefined)?.secret;
    if (typeof secret === 'string') recordSecret('token secret (REST)', secret);
    // A token secret the test made up by hand (revoked, unknown) is a secret all the same; other
    // bearer values (ids, garbage) are not recorded: they may rightly appear in a log.
    if (this.token && /^alc_[0-9A-Za-z]{43,}$/.test(this.token)) recordSecret('bearer token (REST)', this.token);
    return { status: res.status, headers: res.headers, body: parsed as T };
  }
}
