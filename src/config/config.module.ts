import { DynamicModule, Global, Module } from '@nestjs/common';
import { ConfigModule, ConfigService } from '@nestjs/config';
import { AppConfig } from './app-config';
import { Environment, validateEnvironment } from './environment';

export interface ConfigOptions {
  /** Values that win over the process environment (the resolved embedded database URL, test settings). */
  overrides?: Record<string, string | undefined>;
}

const VALIDATED = 'alcarta';

@Global()
@Module({})
export class AlcartaConfigModule {
  static forRoot(options: ConfigOptions = {}): DynamicModule {
    return {
      module: AlcartaConfigModule,
      imports: [
        ConfigModule.forRoot({
          cache: true,
          validate: (raw) => ({ [VALIDATED]: validateEnvironment({ ...raw, ...definedOnly(options.overrides) }) }),
        }),
      ],
      providers: [
        {
          provide: AppConfig,
          inject: [ConfigService],
          useFactory: (config: ConfigService) => new AppConfig(config.getOrThrow<Environment>(VALIDATED)),
        },
      ],
      exports: [AppConfig],
    };
  }
}

function definedOnly(values: Record<string, string | undefined> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(values).filter((e): e is [string, string] => e[1] !== undefined));
}
