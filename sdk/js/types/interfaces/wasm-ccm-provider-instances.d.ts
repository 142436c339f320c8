/// <reference path="./wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/instances@0.2.2' {
  /**
   * Whether the instance behind `node` exists. `false` makes the host delete the Node, so
   * only answer `false` when the cloud said so; stopped instances exist.
   */
  export function instanceExists(node: Node): boolean;
  /**
   * Whether the instance is shut down (powered off). The host taints such nodes.
   */
  export function instanceShutdown(node: Node): boolean;
  /**
   * Provider ID, type, zone, region and addresses of the instance behind `node`.
   */
  export function instanceMetadata(node: Node): Metadata;
  export type Node = import('wasm-ccm:provider/types@0.2.2').Node;
  export type Metadata = import('wasm-ccm:provider/types@0.2.2').InstanceMetadata;
  export type ProviderError = import('wasm-ccm:provider/types@0.2.2').ProviderError;
}
