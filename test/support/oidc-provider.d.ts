/** oidc-provider ships no types; test/support/identity-provider.ts is its only user and types what it calls. */
declare module 'oidc-provider';
