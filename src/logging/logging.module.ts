import { DynamicModule, Global, Module } from '@nestjs/common';
import { Logger } from 'pino';
import { PinoNestLogger } from './logger';

export const ROOT_LOGGER = Symbol('ROOT_LOGGER');

/** Shares the process's pino logger (created before Nest, so start-up failures are JSON too). */
@Global()
@Module({})
export class LoggingModule {
  static forRoot(logger: Logger): DynamicModule {
    return {
      module: LoggingModule,
      providers: [
        { provide: ROOT_LOGGER, useValue: logger },
        { provide: PinoNestLogger, useValue: new PinoNestLogger(logger) },
      ],
      exports: [ROOT_LOGGER, PinoNestLogger],
    };
  }
}
