declare module 'wasm-ccm:provider/log@0.2.2' {
  /**
   * Write one log line with key/value fields. The host tags it with the driver, the function
   * and the object, rate-limits it and redacts secrets.
   */
  export function log(level: Level, message: string, fields: Array<[string, string]>): void;
  /**
   * Mark a value (a token, a password) as secret: the host replaces it in every later log line
   * of this driver. Call it in `init` for every credential read from the configuration.
   */
  export function redact(secret: string): void;
  /**
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
