import { Global, Module } from '@nestjs/common';
import { Logger } from 'pino';
import { AppConfig } from '../config/app-config';
import { createRootLogger, PinoNestLogger } from './logger';

export const ROOT_LOGGER = Symbol('ROOT_LOGGER');

@Global()
@Module({
  providers: [
    { provide: ROOT_LOGGER, inject: [AppConfig], useFactory: (config: AppConfig) => createRootLogger(config.logLevel) },
    { provide: PinoNestLogger, inject: [ROOT_LOGGER], useFactory: (logger: Logger) => new PinoNestLogger(logger) },
  ],
  exports: [ROOT_LOGGER, PinoNestLogger],
})
export class LoggingModule {}
