/// <reference path="./wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/routes@0.2.2' {
  /**
   * The routes of this cluster that the driver manages.
   */
  export function list(): Array<Route>;
  /**
   * Create a route; `name-hint` is the target node's UID.
   */
  export function create(nameHint: string, route: Route): void;
  /**
   * Delete a route as returned by `list`; succeeds when it does not exist.
   */
  export { _delete as delete };
  function _delete(route: Route): void;
  export type Route = import('wasm-ccm:provider/types@0.2.2').Route;
  export type ProviderError = import('wasm-ccm:provider/types@0.2.2').ProviderError;
}
