/** oidc-provider ships no types; the tests use only its constructor and listen(). */
declare module 'oidc-provider';
