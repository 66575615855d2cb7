import { INestApplication } from '@nestjs/common';
import type { Request, Response } from 'express';

/** Where the OpenAPI document of the REST API is served. */
export const OPENAPI_PATH = '/openapi.json';

/**
 * Serves the OpenAPI document (openapi-document.ts) at /openapi.json, without a token: it is
 * registered on the HTTP adapter, beside the Nest routes, so the bearer guard never sees it. The
 * document and `@nestjs/swagger` are loaded on the first request, not at start (loading them takes
 * a good part of a second), and the JSON is kept: the routes do not change while the process runs.
 */
export function serveOpenApi(app: INestApplication): void {
  let json: Promise<string> | undefined;
  app.getHttpAdapter().get(OPENAPI_PATH, async (_req: Request, res: Response) => {
    json ??= import('./openapi-document.js').then(({ buildOpenApiDocument }) =>
      JSON.stringify(buildOpenApiDocument(app)),
    );
    res.type('application/json').send(await json);
  });
}
