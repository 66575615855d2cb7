import { recordSecret } from './test-logs';

/** The sign-in page as a plain HTTP client gets it: its form cookie, and the form's `_csrf` value. */
export async function signInForm(serverUrl: string): Promise<{ setCookie: string; cookie: string; field: string }> {
  const page = await fetch(`${serverUrl}/console/sign-in`);
  const html = await page.text();
  const setCookie = page.headers.getSetCookie().find((c) => c.startsWith('alcarta_console_sign_in=')) ?? '';
  const field = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
  recordSecret('console sign-in form token', field);
  return { setCookie, cookie: setCookie.split(';')[0], field };
}

/** Posts the token sign-in form the way a browser does after loading the sign-in page (no redirects followed). */
export async function postSignIn(serverUrl: string, secret: string): Promise<Response> {
  const { cookie, field } = await signInForm(serverUrl);
  const res = await fetch(`${serverUrl}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: field, token: secret }),
  });
  recordConsoleCookies(res.headers.getSetCookie());
  return res;
}

/** Records the console cookies among `setCookies` (Set-Cookie values): every one carries a secret. */
export function recordConsoleCookies(setCookies: readonly string[]): void {
  for (const header of setCookies) {
    const [name, value] = header.split(';')[0].split('=');
    if (!name.startsWith('alcarta_console') || !value) continue;
    recordSecret(`console cookie ${name}`, value);
    if (name === 'alcarta_console_oidc') {
      // The pending OpenID Connect sign-in: base64url JSON of the state and the PKCE verifier.
      try {
        const pending = JSON.parse(Buffer.from(value, 'base64url').toString()) as Record<string, string>;
        recordSecret('OpenID Connect state', pending.state);
        recordSecret('PKCE code verifier', pending.codeVerifier);
      } catch {
        // Not one the server wrote (a test planting a cookie of its own): the value itself is recorded.
      }
    }
  }
}
