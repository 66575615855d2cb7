/** The sign-in page as a plain HTTP client gets it: its form cookie, and the form's `_csrf` value. */
export async function signInForm(serverUrl: string): Promise<{ setCookie: string; cookie: string; field: string }> {
  const page = await fetch(`${serverUrl}/console/sign-in`);
  const html = await page.text();
  const setCookie = page.headers.getSetCookie().find((c) => c.startsWith('alcarta_console_sign_in=')) ?? '';
  const field = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
  return { setCookie, cookie: setCookie.split(';')[0], field };
}

/** Posts the token sign-in form the way a browser does after loading the sign-in page (no redirects followed). */
export async function postSignIn(serverUrl: string, secret: string): Promise<Response> {
  const { cookie, field } = await signInForm(serverUrl);
  return fetch(`${serverUrl}/console/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: field, token: secret }),
  });
}
