import sanitizeHtml from 'sanitize-html';

/**
 * What sanitizing removed from a draft's HTML, by kind. Every key is always present, so an agent can
 * read `sanitized.scripts` without checking for it; all zeros means the HTML is sent as written.
 */
export interface SanitizedCounts {
  /** `<script>` elements and `javascript:` links. */
  scripts: number;
  /** `on…` attributes (onclick, onload, onerror…). */
  event_handlers: number;
  /** Things that would load from another server: images, frames, media, stylesheets by absolute URL. */
  remote_resources: number;
  /** The same by relative URL (or `cid:`): they would load from wherever the mail is shown, or nowhere. */
  relative_resources: number;
  /** `<style>` elements and `style` attributes. */
  styles: number;
  /** Forms and their controls. */
  forms: number;
  /** Any other element the policy does not allow (`<meta>`, `<base>`, `<svg>`, unknown tags…). */
  other_elements: number;
}

export interface SanitizedDraft {
  html: string;
  removed: SanitizedCounts;
}

/** Elements kept (their unlisted attributes are dropped). */
const ALLOWED_TAGS: readonly string[] = [...sanitizeHtml.defaults.allowedTags, 'img'];
/** Attributes kept, per element. */
const ALLOWED_ATTRIBUTES: Readonly<Record<string, readonly string[]>> = {
  a: ['href', 'title'],
  img: ['src', 'alt', 'width', 'height'],
  td: ['colspan', 'rowspan'],
  th: ['colspan', 'rowspan', 'scope'],
};
const FORM_TAGS = new Set(['form', 'input', 'button', 'select', 'option', 'optgroup', 'textarea', 'datalist']);
/** Attributes whose value is something a mail client fetches. */
const RESOURCE_ATTRIBUTES = new Set([
  'src',
  'srcset',
  'background',
  'poster',
  'data',
  'lowsrc',
  'dynsrc',
  'xlink:href',
]);
/** Elements whose `href` is fetched rather than followed. */
const HREF_LOADS = new Set(['link', 'image', 'use']);
/** The only image source kept: an inline image, which loads nothing. */
const INLINE_IMAGE = /^\s*data:image\//i;
const ABSOLUTE_URL = /^\s*(?:[a-z][a-z0-9+.-]*:|\/\/|\\\\)/i;
const JAVASCRIPT_URL = /^\s*javascript:/i;

/**
 * The one HTML policy of a `send_email` draft: applied when the request is made (the stored draft is
 * the sanitized one, and that is what a person approves and what is sent) and again by the console
 * before it renders a draft. No script, no event handlers, no styles, no forms, and nothing that loads
 * from elsewhere: images only as inline `data:image/…` URLs, links kept (following one loads nothing
 * by itself). The counts say what was removed, so the agent and the approver both learn it.
 */
export function sanitizeDraftHtml(html: string): SanitizedDraft {
  const removed = noneRemoved();
  const sanitized = sanitizeHtml(html, {
    allowedTags: [...ALLOWED_TAGS],
    allowedAttributes: Object.fromEntries(Object.entries(ALLOWED_ATTRIBUTES).map(([tag, a]) => [tag, [...a]])),
    allowedSchemes: ['http', 'https', 'mailto'],
    allowedSchemesByTag: { img: ['data'] },
    allowProtocolRelative: false,
    onOpenTag: (tag, attributes) => countRemovals(tag.toLowerCase(), attributes, removed),
    // sanitize-html lets a relative image source through (a scheme check needs a scheme): drop it.
    transformTags: {
      img: (tagName, attribs) => {
        const { src, ...rest } = attribs;
        return { tagName, attribs: src !== undefined && INLINE_IMAGE.test(src) ? attribs : rest };
      },
    },
    // An image whose source was removed is dropped whole rather than left as a broken frame.
    exclusiveFilter: (frame) => frame.tag === 'img' && !frame.attribs.src,
  });
  return { html: sanitized, removed };
}

export function noneRemoved(): SanitizedCounts {
  return {
    scripts: 0,
    event_handlers: 0,
    remote_resources: 0,
    relative_resources: 0,
    styles: 0,
    forms: 0,
    other_elements: 0,
  };
}

/**
 * Counts what the policy above removes from one opening tag, seen before sanitize-html acts on it.
 * An element that is dropped counts once, under what it is; the attributes of a kept element count
 * one each.
 */
function countRemovals(tag: string, attributes: Record<string, string>, removed: SanitizedCounts): void {
  const names = Object.keys(attributes).map((a) => a.toLowerCase());
  removed.event_handlers += names.filter((a) => a.startsWith('on')).length;
  if (!ALLOWED_TAGS.includes(tag)) {
    const kind = droppedElementKind(tag, attributes);
    removed[kind] += 1;
    return;
  }
  if (names.includes('style')) removed.styles += 1;
  for (const [name, value] of Object.entries(attributes)) {
    const attribute = name.toLowerCase();
    if (attribute === 'href' && JAVASCRIPT_URL.test(value)) removed.scripts += 1;
    else if (RESOURCE_ATTRIBUTES.has(attribute) && !isKeptImage(tag, attribute, value))
      removed[resourceKind(value)] += 1;
  }
}

function isKeptImage(tag: string, attribute: string, value: string): boolean {
  return tag === 'img' && attribute === 'src' && INLINE_IMAGE.test(value);
}

function droppedElementKind(tag: string, attributes: Record<string, string>): keyof SanitizedCounts {
  if (tag === 'script') return 'scripts';
  if (tag === 'style') return 'styles';
  if (FORM_TAGS.has(tag)) return 'forms';
  const source = Object.entries(attributes).find(
    ([name]) => RESOURCE_ATTRIBUTES.has(name.toLowerCase()) || (name.toLowerCase() === 'href' && HREF_LOADS.has(tag)),
  );
  return source ? resourceKind(source[1]) : 'other_elements';
}

function resourceKind(url: string): 'remote_resources' | 'relative_resources' {
  return ABSOLUTE_URL.test(url) && !/^\s*cid:/i.test(url) ? 'remote_resources' : 'relative_resources';
}

const REMOVED_NAMES: Readonly<Record<keyof SanitizedCounts, [string, string]>> = {
  scripts: ['script', 'scripts'],
  event_handlers: ['event handler', 'event handlers'],
  remote_resources: [
    'remote resource (image, frame, media or stylesheet)',
    'remote resources (images, frames, media or stylesheets)',
  ],
  relative_resources: ['resource by relative address', 'resources by relative address'],
  styles: ['style', 'styles'],
  forms: ['form element', 'form elements'],
  other_elements: ['other element', 'other elements'],
};

/** What was removed, for people: "1 script, 2 remote resources (…)"; empty when nothing was. */
export function describeRemoved(counts: SanitizedCounts): string {
  return (Object.keys(REMOVED_NAMES) as Array<keyof SanitizedCounts>)
    .filter((kind) => counts[kind] > 0)
    .map((kind) => `${counts[kind]} ${REMOVED_NAMES[kind][counts[kind] === 1 ? 0 : 1]}`)
    .join(', ');
}

/**
 * A draft's HTML as a page shows it: a whole document for a sandboxed `srcdoc` frame. The stored draft
 * was sanitized when it was requested; it is sanitized again here with the same policy, so a draft
 * stored before that (or changed behind the service's back) is still shown without scripts or remote
 * content. The frame runs no script and the console's CSP covers it too: three fences, not one. A base
 * target keeps links from replacing the page.
 */
export function draftDocument(html: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><base target="_blank"></head><body>${sanitizeDraftHtml(html).html}</body></html>`;
}
