/// <reference path="./wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/provider@0.2.2' {
  /**
   * Who the driver is. Called before `init`; makes no requests.
   */
  export function info(): ProviderInfo;
  /**
   * Configure the driver. `config` is the `--cloud-config` file as-is (empty when none);
   * `env` holds the process environment variables whose names start with one of the
   * driver's `env-prefixes` (and, for a driver that declares its plain variables in
   * `environment`, only the declared ones and the places of its secrets). Called once per driver instance before any other call; an error
   * here stops the driver from loading.
   */
  export function init(ctx: Context, config: Uint8Array, env: Array<[string, string]>): void;
  /**
   * Periodic upkeep (garbage collection, cache refresh), called every
   * `--housekeeping-period`. A driver with nothing to do returns ok.
   */
  export function housekeeping(): void;
  export type Context = import('wasm-ccm:provider/types@0.2.2').Context;
  export type ProviderError = import('wasm-ccm:provider/types@0.2.2').ProviderError;
  export type ProviderInfo = import('wasm-ccm:provider/types@0.2.2').ProviderInfo;
}
