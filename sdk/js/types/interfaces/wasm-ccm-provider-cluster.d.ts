/// <reference path="./wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/cluster@0.2.2' {
  /**
   * All Services of type LoadBalancer in the cluster. Each call copies every one of them into
   * the guest; prefer the two queries below, which copy only the Services that matter.
   */
  export function loadBalancerServices(): Array<Service>;
  /**
   * The Services of type LoadBalancer that carry the annotation `key` and, when `values` is
   * not empty, whose value is one of `values` (compared exactly). For cross-service checks
   * such as a floating IP claimed twice.
   */
  export function servicesWithAnnotation(key: string, values: Array<string>): Array<Service>;
  /**
   * The Services of type LoadBalancer that use one of `ips` as `spec.loadBalancerIP` or in
   * `status.loadBalancer.ingress[].ip` (compared as addresses, so `2001:db8::1` matches
   * `2001:0db8::1`). For an address pool: which of these addresses are taken?
   */
  export function servicesWithAddress(ips: Array<string>): Array<Service>;
  /**
   * Which of `ips` the Services of type LoadBalancer hold, as `spec.loadBalancerIP`, as an
   * ingress IP or as the value of the annotation `annotation` (empty: no annotation), compared
   * as addresses. Answers with addresses and UIDs, not whole Services: for an address pool
   * asking which of thousands of candidates are taken.
   */
  export function addressClaims(ips: Array<string>, annotation: string): Array<AddressClaim>;
  /**
   * The backend nodes of the current `load-balancer.ensure` or `update` call (its
   * `node-set`), in name order; empty in any other call. Fetch them once per generation.
   */
  export function nodes(): Array<Node>;
  /**
   * Record a Kubernetes event on the object of the current call. `reason` is UpperCamelCase.
   */
  export function event(kind: EventType, reason: string, message: string): void;
  export type Service = import('wasm-ccm:provider/types@0.2.2').Service;
  export type Node = import('wasm-ccm:provider/types@0.2.2').Node;
  /**
   * Severity of an event.
   * # Variants
   * 
   * ## `"normal"`
   * 
   * ## `"warning"`
   */
  export type EventType = 'normal' | 'warning';
  /**
   * Where a Service holds an address.
   * # Variants
   * 
   * ## `"load-balancer-ip"`
   * 
   * `spec.loadBalancerIP`: asked for, not necessarily granted.
   * ## `"annotation"`
   * 
   * The value of the annotation the query named.
   * ## `"ingress"`
   * 
   * `status.loadBalancer.ingress[].ip`: published.
   */
  export type AddressUse = 'load-balancer-ip' | 'annotation' | 'ingress';
  /**
   * An address a LoadBalancer Service holds (`address-claims`).
   */
  export interface AddressClaim {
    /**
     * The address as the query spelled it.
     */
    ip: string,
    /**
     * The Service's UID.
     */
    serviceUid: string,
    /**
     * Where the Service holds it.
     */
    usedAs: AddressUse,
  }
}
