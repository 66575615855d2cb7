import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { getMetadataStorage } from 'class-validator';
import ts from 'typescript';
import { Environment } from '#app/config/environment.js';
import { cell, GENERATED_NOTE } from './markdown';

export const ENVIRONMENT_SOURCE = 'src/config/environment.ts';

export interface SettingDoc {
  name: string;
  /** The TypeScript type as written (`number`, `string`, `'on' | 'off'`). */
  type: string;
  /** The default as an environment variable holds it; undefined: unset. */
  defaultValue: string | undefined;
  /** Allowed values and ranges, from the validators. */
  constraints: string[];
  /** The property's doc comment. */
  meaning: string;
}

/**
 * Every setting of the configuration class, in its order: names, types and doc comments read from
 * its source with the TypeScript compiler API, defaults from an instance, and limits from its
 * class-validator rules, so the reference says what the code does.
 */
export function settingDocs(root: string): SettingDoc[] {
  const file = join(root, ENVIRONMENT_SOURCE);
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2023, true);
  const declaration = source.statements.find(
    (s): s is ts.ClassDeclaration => ts.isClassDeclaration(s) && s.name?.text === Environment.name,
  );
  if (!declaration) throw new Error(`${ENVIRONMENT_SOURCE} declares no class ${Environment.name}`);
  const defaults = new Environment() as unknown as Record<string, unknown>;
  const rules = getMetadataStorage().getTargetValidationMetadatas(Environment, '', true, false);
  return declaration.members.filter(ts.isPropertyDeclaration).map((property) => {
    const name = property.name.getText(source);
    const value = defaults[name];
    return {
      name,
      type: property.type?.getText(source) ?? 'string',
      defaultValue: value === undefined ? undefined : typeof value === 'string' ? value : JSON.stringify(value),
      constraints: constraintsOf(rules.filter((r) => r.propertyName === name)),
      meaning: ts
        .getJSDocCommentsAndTags(property)
        .map((doc) => ts.getTextOfJSDocComment(doc.comment) ?? '')
        .join(' ')
        .replace(/\s+/g, ' ')
        .trim(),
    };
  });
}

/** What the validators allow, in words: "integer 1–3600", "an http(s) URL", "matches `…`". */
function constraintsOf(rules: { name?: string; type: string; constraints?: unknown[] }[]): string[] {
  const argument = (name: string) =>
    rules.find((r) => (r.name ?? r.type) === name)?.constraints?.[0] as number | RegExp | undefined;
  const [min, max] = [argument('min'), argument('max')];
  const range =
    min !== undefined && max !== undefined
      ? `${min}–${max}`
      : min !== undefined
        ? `at least ${min}`
        : max !== undefined
          ? `at most ${max}`
          : undefined;
  const pattern = argument('matches');
  return [
    rules.some((r) => r.name === 'isInt') ? 'integer' : undefined,
    range,
    rules.some((r) => r.name === 'isUrl') ? 'an http(s) URL' : undefined,
    pattern !== undefined ? `matches \`${pattern.toString()}\`` : undefined,
  ].filter((text): text is string => text !== undefined);
}

/** docs/reference/settings.md. */
export function settingsReference(root: string): string {
  const lines = [
    '# Settings',
    '',
    GENERATED_NOTE(`the configuration class (\`${ENVIRONMENT_SOURCE}\`)`),
    '',
    'Every setting is an environment variable, read at start (also from a `.env` file in the working ' +
      'directory); every one is optional. A value the class refuses stops the server at start with a message ' +
      'naming the variable. `.env.example` lists them with their defaults, and the Helm chart sets them ' +
      '(docs/operators.md).',
    '',
    '| Setting | Type | Default | Meaning |',
    '| --- | --- | --- | --- |',
  ];
  for (const setting of settingDocs(root)) {
    const type = [`\`${setting.type}\``, ...setting.constraints].join(', ');
    const defaultValue =
      setting.defaultValue === undefined
        ? 'unset'
        : setting.defaultValue === ''
          ? 'empty'
          : `\`${setting.defaultValue}\``;
    lines.push(`| \`${setting.name}\` | ${cell(type)} | ${cell(defaultValue)} | ${cell(setting.meaning)} |`);
  }
  lines.push('');
  return lines.join('\n');
}
