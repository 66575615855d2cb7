import { INestApplication, Type } from '@nestjs/common';
import { PARAMTYPES_METADATA, ROUTE_ARGS_METADATA } from '@nestjs/common/constants.js';
import { RouteParamtypes } from '@nestjs/common/internal';
import { ModulesContainer } from '@nestjs/core';
import { DocumentBuilder, OpenAPIObject, SwaggerModule } from '@nestjs/swagger';
import type { OperationObject, ParameterObject, ResponsesObject, SchemaObject } from '@nestjs/swagger';
import { validationMetadatasToSchemas } from 'class-validator-jsonschema';
import { PUBLIC_ROUTE, REQUIRED_SCOPES } from '../kernel/route-decorators';
import { OperationText, REST_OPERATIONS } from './rest-operations';
import { REST_SCHEMAS } from './rest-schemas';

/**
 * The JSON API: REST under /v1, health and metrics. The MCP endpoint (JSON-RPC), the console's HTML
 * pages and the OAuth discovery document have their own contracts (docs/agents.md, docs/approvers.md).
 */
const DOCUMENTED_PATH = /^\/(v1|health|metrics)(\/|$)/;

const COMMON_ERRORS: Record<number, string> = {
  401: 'No token, or a token that is unknown, expired or revoked (WWW-Authenticate names how to get one).',
  403: 'The token lacks the scope or the mailboxes this needs.',
  429: 'Rate limited (ALCARTA_RATE_LIMIT_PER_SECOND); Retry-After says when to try again.',
  503: 'The database is unavailable, or the replica is shutting down; Retry-After says when to try again.',
};

/**
 * The OpenAPI 3 document of the REST API, built with `@nestjs/swagger` from the routes the Nest
 * application registers. The project compiles with `tsc`, without the Swagger compiler plugin, so
 * request schemas come from the DTOs' class-validator rules (class-validator-jsonschema): the rules
 * that validate a request are the ones documented. Summaries and answers come from REST_OPERATIONS
 * and REST_SCHEMAS. Works on an application created with `preview: true` (no database needed).
 */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Alcarta REST API')
    .setDescription(
      'Administration (mailboxes, tokens, grants, approvers, outbox), decisions on approval requests, message ' +
        'ingest, health and metrics. Agents use the MCP endpoint /mcp instead (docs/agents.md).',
    )
    .setVersion('1')
    .addBearerAuth(
      { type: 'http', scheme: 'bearer', description: 'An Alcarta token (alc_…) or a JWT of the configured issuer.' },
      'bearer',
    )
    .build();
  const scanned = SwaggerModule.createDocument(app, config, {
    operationIdFactory: (controller, method) => `${controller.replace(/Controller$/, '')}_${method}`,
  });
  const dtoSchemas = validationMetadatasToSchemas({ refPointerPrefix: '#/components/schemas/' }) as Record<
    string,
    SchemaObject
  >;
  const controllers = controllersByName(app);
  const usedTexts = new Set<string>();
  const schemas: Record<string, SchemaObject> = { ...REST_SCHEMAS };
  const paths: OpenAPIObject['paths'] = {};

  for (const path of Object.keys(scanned.paths)
    .filter((p) => DOCUMENTED_PATH.test(p))
    .sort()) {
    const item = scanned.paths[path];
    for (const method of ['get', 'put', 'post', 'delete', 'patch'] as const) {
      const scannedOperation = item[method];
      if (!scannedOperation) continue;
      const id = scannedOperation.operationId!;
      const text = REST_OPERATIONS[id];
      if (!text) throw new Error(`The OpenAPI document has no text for ${method.toUpperCase()} ${path} (${id})`);
      usedTexts.add(id);
      const route = routeOf(controllers, id);
      const dtos = dtoParameters(route);
      for (const name of [dtos.body, dtos.query, ...referencedDtos(text)].filter((n) => n !== undefined)) {
        addDtoSchema(schemas, dtoSchemas, name);
      }
      paths[path] = {
        ...paths[path],
        [method]: operation(id, scannedOperation, text, route, dtos, schemas),
      };
    }
  }
  const unused = Object.keys(REST_OPERATIONS).filter((id) => !usedTexts.has(id));
  if (unused.length > 0) throw new Error(`REST_OPERATIONS names operations that do not exist: ${unused.join(', ')}`);

  return {
    openapi: scanned.openapi,
    info: scanned.info,
    servers: [],
    tags: [],
    paths,
    components: { securitySchemes: scanned.components?.securitySchemes, schemas: sortedKeys(schemas) },
  };
}

interface Route {
  controller: Type;
  method: string;
}

interface RouteDtos {
  body?: string;
  query?: string;
}

function operation(
  id: string,
  scanned: OperationObject,
  text: OperationText,
  route: Route,
  dtos: RouteDtos,
  schemas: Record<string, SchemaObject>,
): OperationObject {
  const handler = (route.controller.prototype as Record<string, object>)[route.method];
  const isPublic = metadata<boolean>(PUBLIC_ROUTE, handler, route.controller) === true;
  const scopes = metadata<string[]>(REQUIRED_SCOPES, handler, route.controller) ?? [];
  const scopeNote = isPublic
    ? 'No token needed.'
    : scopes.length > 0
      ? `Token scope: ${scopes.map((s) => `\`${s}\``).join(' or ')}${scopes.includes('admin') ? '' : ' (or `admin`)'}.`
      : 'Any valid token.';
  const parameters: ParameterObject[] = [
    ...(scanned.parameters as ParameterObject[]),
    ...queryParameters(dtos.query, schemas),
    ...(text.parameters ?? []),
  ];
  const requestBody =
    text.requestBody ??
    (dtos.body
      ? { required: true, content: { 'application/json': { schema: { $ref: `#/components/schemas/${dtos.body}` } } } }
      : undefined);
  return {
    operationId: id,
    summary: text.summary,
    description: [text.description, scopeNote].filter(Boolean).join('\n\n'),
    tags: scanned.tags,
    ...(parameters.length > 0 && { parameters }),
    ...(requestBody && { requestBody }),
    responses: responses(text, isPublic),
    ...(!isPublic && { security: [{ bearer: [] }] }),
  };
}

function responses(text: OperationText, isPublic: boolean): ResponsesObject {
  const { success } = text;
  const answers: ResponsesObject = {
    [success.status]: {
      description: success.description,
      ...(success.schema && { content: { [success.contentType ?? 'application/json']: { schema: success.schema } } }),
    },
  };
  const errors = { ...(isPublic ? {} : COMMON_ERRORS), ...text.errors };
  for (const [status, error] of Object.entries(errors).sort(([a], [b]) => Number(a) - Number(b))) {
    const { description, schema } = typeof error === 'string' ? { description: error, schema: 'Error' } : error;
    answers[status] = {
      description,
      content: { 'application/json': { schema: { $ref: `#/components/schemas/${schema}` } } },
    };
  }
  return answers;
}

/** A query DTO as one parameter per property, as the validation pipe reads it. */
function queryParameters(dto: string | undefined, schemas: Record<string, SchemaObject>): ParameterObject[] {
  if (!dto) return [];
  const schema = schemas[dto];
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({
    name,
    in: 'query',
    required: schema.required?.includes(name) ?? false,
    schema: property as SchemaObject,
  }));
}

/** The DTO classes of a handler's @Body() and @Query() parameters. */
function dtoParameters({ controller, method }: Route): RouteDtos {
  const args = (Reflect.getMetadata(ROUTE_ARGS_METADATA, controller, method) ?? {}) as Record<
    string,
    { index: number; data?: unknown }
  >;
  const types = (Reflect.getMetadata(PARAMTYPES_METADATA, controller.prototype as object, method) ?? []) as unknown[];
  const dtoAt = (paramtype: RouteParamtypes): string | undefined => {
    const arg = Object.entries(args).find(([key, value]) => key === `${paramtype}:${value.index}` && !value.data);
    const type = arg && types[arg[1].index];
    return typeof type === 'function' && type !== Object ? type.name : undefined;
  };
  return { body: dtoAt(RouteParamtypes.BODY), query: dtoAt(RouteParamtypes.QUERY) };
}

/** DTOs an operation text names itself (a body the route reads by hand). */
function referencedDtos(text: OperationText): string[] {
  const content = Object.values(text.requestBody?.content ?? {});
  return content
    .map((media: { schema?: unknown }) =>
      (media.schema as { $ref?: string } | undefined)?.$ref?.replace('#/components/schemas/', ''),
    )
    .filter((name): name is string => name !== undefined && !(name in REST_SCHEMAS));
}

function controllersByName(app: INestApplication): Map<string, Type> {
  const controllers = new Map<string, Type>();
  for (const module of app.get(ModulesContainer).values()) {
    for (const wrapper of module.controllers.values()) {
      const type = wrapper.metatype as Type | null;
      if (type) controllers.set(type.name.replace(/Controller$/, ''), type);
    }
  }
  return controllers;
}

function routeOf(controllers: Map<string, Type>, operationId: string): Route {
  const [name, method] = operationId.split('_');
  return { controller: controllers.get(name) ?? missing(`controller of ${operationId}`), method };
}

/** Handler metadata wins over the controller's, as the guards read it. */
function metadata<T>(key: string, handler: object, controller: Type): T | undefined {
  return (Reflect.getMetadata(key, handler) ?? Reflect.getMetadata(key, controller)) as T | undefined;
}

function sortedKeys<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}

function missing(what: string): never {
  throw new Error(`OpenAPI document: no ${what}`);
}

/** Adds the schema of the DTO `name` and, through their `$ref`s, of the DTOs nested in it. */
function addDtoSchema(
  schemas: Record<string, SchemaObject>,
  dtoSchemas: Record<string, SchemaObject>,
  name: string,
): void {
  if (schemas[name]) return;
  schemas[name] = dtoSchemas[name] ?? missing(`class-validator schema of ${name}`);
  for (const [, nested] of JSON.stringify(schemas[name]).matchAll(/"#\/components\/schemas\/([^"]+)"/g)) {
    if (dtoSchemas[nested]) addDtoSchema(schemas, dtoSchemas, nested);
  }
}
