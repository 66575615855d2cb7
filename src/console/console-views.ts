import { Injectable } from '@nestjs/common';
import { Eta } from 'eta';
import { join } from 'node:path';
import { AppConfig } from '../config/app-config';

/** Where the console's templates and static assets are: copied next to this file by the build. */
export const CONSOLE_VIEWS_DIR = join(__dirname, 'views');

/**
 * The console's server-rendered pages (docs/approvers.md): Eta templates under `views/`, every value escaped
 * unless a template says otherwise, each page inside `layout.eta`. Templates are compiled once and
 * cached.
 */
@Injectable()
export class ConsoleViews {
  private readonly eta = new Eta({ views: CONSOLE_VIEWS_DIR, autoEscape: true, cache: true });
  /** What every template may use: the time format, and whether the header links the outbox page. */
  private readonly shared: { utc: typeof utc; outboxPage: boolean };

  constructor(config: AppConfig) {
    this.shared = { utc, outboxPage: config.keepsOutboundMail };
  }

  /** The page `name` (`views/<name>.eta`) with `data`; `title` names it in the layout. */
  render(name: string, data: { title: string } & Record<string, unknown>): string {
    return this.eta.render(name, { ...data, ...this.shared });
  }

  /** A part of a page (`views/_<name>.eta`, no layout), e.g. the pending list a live update replaces. */
  fragment(name: string, data: Record<string, unknown>): string {
    return this.eta.render(name, { ...data, ...this.shared });
  }
}

/**
 * An ISO time as the page shows it without JavaScript ("2026-12-02 10:00 UTC"); console.js
 * rewrites each `<time datetime>` into the browser's own time zone.
 */
function utc(iso: string): string {
  return `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;
}
