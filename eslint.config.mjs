// @ts-check
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

/** The feature modules under src/: each serves part of the product and may depend on the platform below it. */
const FEATURES = [
  'mail',
  'approvals',
  'approval-mail',
  'outbox',
  'smtp',
  'auth',
  'waits',
  'tasks',
  'delivery',
  'mcp',
  'console',
];

/**
 * Module dependencies point one way (README "Module map"). Each entry: the files of a module, and the
 * modules (directories under src/) they must not import. A lower module that needs something from a
 * higher one asks for it through a hook or registry it owns (see CredentialRevocationHooks, the wait
 * resolution hooks, the Metrics registry), so the dependency is inverted, not hidden.
 */
const LAYERS = [
  { module: 'common', forbidden: FEATURES },
  { module: 'config', forbidden: FEATURES },
  { module: 'metrics', forbidden: FEATURES.filter((m) => m !== 'auth') },
  { module: 'events', forbidden: FEATURES },
  {
    module: 'auth',
    forbidden: ['approvals', 'approval-mail', 'outbox', 'smtp', 'waits', 'tasks', 'delivery', 'mcp', 'console'],
  },
  { module: 'waits', forbidden: ['tasks', 'delivery', 'mcp', 'console'] },
  { module: 'tasks', forbidden: ['delivery', 'mcp', 'console'] },
  { module: 'delivery', forbidden: ['tasks', 'mcp', 'console'] },
];

const layerRules = LAYERS.map(({ module, forbidden }) => ({
  files: [`src/${module}/**/*.ts`],
  rules: {
    'no-restricted-imports': [
      'error',
      {
        patterns: [
          {
            regex: `^(\\.\\./)+(${forbidden.join('|')})(/|$)`,
            message: `${module}/ must not depend on ${forbidden.join(', ')} (module dependencies point one way; invert with a hook or registry that ${module}/ owns).`,
          },
        ],
      },
    ],
  },
}));

export default tseslint.config(
  { ignores: ['dist/', 'dist-test/', 'node_modules/', '.alcarta/', 'coverage/'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['eslint.config.mjs', 'src/console/views/assets/*.js'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            { from: 'package', name: ['describe', 'it', 'test', 'suite', 'before', 'after'], package: 'node:test' },
          ],
        },
      ],
      '@typescript-eslint/explicit-module-boundary-types': 'off',
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  ...layerRules,
  { files: ['**/*.mjs'], ...tseslint.configs.disableTypeChecked },
  {
    // The console's browser script: plain JavaScript served as is, checked without type information.
    files: ['src/console/views/assets/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      sourceType: 'script',
      globals: { window: 'readonly', document: 'readonly', EventSource: 'readonly' },
    },
  },
  prettier,
);
