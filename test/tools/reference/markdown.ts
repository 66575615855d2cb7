/** The first paragraph of every generated reference file. */
export const GENERATED_NOTE = (source: string): string =>
  `Generated from ${source} by \`npm run docs:reference\`; do not edit by hand (a test compares it with the code).`;

/** A table cell: no line breaks, and pipes escaped. */
export function cell(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');
}
