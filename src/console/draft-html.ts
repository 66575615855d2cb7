import sanitizeHtml from 'sanitize-html';

/**
 * A draft's HTML as the console shows it (SPEC 11): no script, no event handlers, no styles, no
 * forms, and nothing that loads from elsewhere: images only as `data:` URLs. The result goes into a
 * sandboxed `srcdoc` frame without allow-scripts, which the console's CSP also covers: this is the
 * first of three fences, not the only one.
 */
export function sanitizeDraftHtml(html: string): string {
  return sanitizeHtml(html, {
    allowedTags: [...sanitizeHtml.defaults.allowedTags, 'img'],
    allowedAttributes: {
      a: ['href', 'title'],
      img: ['src', 'alt', 'width', 'height'],
      td: ['colspan', 'rowspan'],
      th: ['colspan', 'rowspan', 'scope'],
    },
    allowedSchemes: ['http', 'https', 'mailto'],
    allowedSchemesByTag: { img: ['data'] },
    allowProtocolRelative: false,
    // An image whose source was removed is dropped whole rather than left as a broken frame.
    exclusiveFilter: (frame) => frame.tag === 'img' && !frame.attribs.src,
  });
}

/** The frame's document: the sanitized body with a base target, so links cannot replace the console. */
export function draftDocument(html: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><base target="_blank"></head><body>${sanitizeDraftHtml(html)}</body></html>`;
}
