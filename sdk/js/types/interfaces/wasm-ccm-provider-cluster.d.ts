/// <reference path="./wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/cluster@0.1.0' {
  /**
   * All Services of type LoadBalancer in the cluster (for cross-service checks such as a
   * floating IP claimed twice).
   */
  export function loadBalancerServices(): Array<Service>;
  /**
   * Record a Kubernetes event on the object of the current call. `reason` is UpperCamelCase.
   */
  export function event(kind: EventType, reason: string, message: string): void;
  export type Service = import('wasm-ccm:provider/types@0.1.0').Service;
  /**
   * Severity of an event.
   * # Variants
   * 
   * ## `"normal"`
   * 
   * ## `"warning"`
   */
  export type EventType = 'normal' | 'warning';
}
