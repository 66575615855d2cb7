import { Controller, Get, Header, Param, Res } from '@nestjs/common';
import { Response } from 'express';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Public } from '../kernel/route-decorators';
import { AlcartaError } from '../kernel/errors';
import { CONSOLE_VIEWS_DIR } from './console-views';

/** The console's own stylesheet, script and icon: a fixed list, read once, served from memory. */
const ASSETS: Record<string, string> = {
  'console.css': 'text/css; charset=utf-8',
  'console.js': 'text/javascript; charset=utf-8',
  'favicon.svg': 'image/svg+xml',
};

@Controller('console/assets')
export class ConsoleAssetsController {
  private readonly files = new Map(
    Object.keys(ASSETS).map((name) => [name, readFileSync(join(CONSOLE_VIEWS_DIR, 'assets', name))]),
  );

  @Public()
  @Get(':name')
  @Header('Cache-Control', 'public, max-age=300')
  asset(@Param('name') name: string, @Res() res: Response): void {
    const file = this.files.get(name);
    if (!file) throw new AlcartaError('not_found', 'asset_not_found', `No console asset ${JSON.stringify(name)}.`);
    res.type(ASSETS[name]).send(file);
  }
}
