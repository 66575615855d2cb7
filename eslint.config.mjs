// @ts-check
import eslint from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';
import { SRC_RANKS, TOP_LEVEL_FILES } from './eslint.ranks.mjs';

/**
 * Module dependencies point down the ranks of eslint.ranks.mjs: each directory of src/ may import
 * only directories of a strictly lower rank, and none of the top-level files.
 */
const TOP_LEVEL_MODULES = TOP_LEVEL_FILES.map((file) => file.replace(/\.ts$/, '').replace('.', '\\.'));
const rankRules = Object.entries(SRC_RANKS).map(([module, rank]) => {
  const notBelow = Object.keys(SRC_RANKS).filter((other) => other !== module && SRC_RANKS[other] >= rank);
  const patterns = [
    {
      regex: `^(\\.\\./)+(${TOP_LEVEL_MODULES.join('|')})$`,
      message: `${module}/ must not import the top-level files (they start the application).`,
    },
  ];
  if (notBelow.length > 0) {
    patterns.push({
      regex: `^(\\.\\./)+(${notBelow.join('|')})(/|$)`,
      message: `${module}/ (rank ${rank}) may import only lower ranks, not ${notBelow.join(', ')} (eslint.ranks.mjs; invert with a hook or registry that ${module}/ owns).`,
    });
  }
  return { files: [`src/${module}/**/*.ts`], rules: { 'no-restricted-imports': ['error', { patterns }] } };
});

export default tseslint.config(
  { ignores: ['dist/', 'dist-test/', 'node_modules/', '.alcarta/', 'coverage/'] },
  eslint.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: ['eslint.config.mjs', 'eslint.ranks.mjs', 'src/console/views/assets/*.js'],
        },
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
  ...rankRules,
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
