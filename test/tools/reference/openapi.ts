import { NestFactory } from '@nestjs/core';
import type { OpenAPIObject } from '@nestjs/swagger';
import { AppModule } from '#app/app.module.js';
import { createRootLogger } from '#app/logging/logger.js';
import { buildOpenApiDocument } from '#app/openapi/openapi-document.js';

/**
 * The document /openapi.json serves, built from the application in Nest's preview mode: the module
 * graph and routes are scanned but no provider runs, so no database or listener is needed.
 */
export async function openApiDocument(): Promise<OpenAPIObject> {
  const app = await NestFactory.create(AppModule.register({}, createRootLogger('silent')), {
    preview: true,
    logger: false,
    abortOnError: false,
  });
  try {
    return buildOpenApiDocument(app);
  } finally {
    await app.close();
  }
}
