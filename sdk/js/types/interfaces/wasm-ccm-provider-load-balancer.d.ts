/// <reference path="./wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/load-balancer@0.2.2' {
  /**
   * The load balancer's current ingress, or none when it does not exist. Read-only.
   */
  export function get(service: Service): Array<Ingress> | undefined;
  /**
   * The name the driver gives the service's load balancer; deterministic, no requests.
   */
  export function name(service: Service): string;
  /**
   * Create or update the load balancer so it matches `service` and sends traffic to the nodes
   * of `nodes` (read them with `cluster.nodes`). Idempotent: a second call with the same inputs
   * changes nothing in the cloud.
   */
  export function ensure(service: Service, nodes: NodeSet): EnsureResult;
  /**
   * Only the set of backend nodes changed.
   */
  export function update(service: Service, nodes: NodeSet): void;
  /**
   * Delete the load balancer; succeeds when it does not exist.
   */
  export { _delete as delete };
  function _delete(service: Service): void;
  export type Service = import('wasm-ccm:provider/types@0.2.2').Service;
  export type NodeSet = import('wasm-ccm:provider/types@0.2.2').NodeSet;
  export type Ingress = import('wasm-ccm:provider/types@0.2.2').Ingress;
  export type EnsureResult = import('wasm-ccm:provider/types@0.2.2').EnsureResult;
  export type ProviderError = import('wasm-ccm:provider/types@0.2.2').ProviderError;
}
