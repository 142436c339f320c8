declare module 'wasm-ccm:provider/environment@0.2.2' {
  /**
   * The exact names of the plain (non-secret) environment variables the driver reads, each
   * under one of its `env-prefixes`; at most 64, none a declared secret's place. Called after
   * `info` and before `init`; makes no requests.
   */
  export function plainVariables(): Array<string> | undefined;
}
