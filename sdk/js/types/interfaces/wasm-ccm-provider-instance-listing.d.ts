/// <reference path="./wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/instance-listing@0.2.2' {
  /**
   * One page of the instances that may serve this cluster's nodes, filtered as narrowly as
   * the cloud allows (a tag, a label, a project). `page` is `none` for the first page, else
   * the `next` of the page before. An instance that exists is listed, stopped or not.
   */
  export function listInstances(page: string | undefined): InstancePage;
  export type InstanceMetadata = import('wasm-ccm:provider/types@0.2.2').InstanceMetadata;
  export type ProviderError = import('wasm-ccm:provider/types@0.2.2').ProviderError;
  /**
   * One instance as the listing shows it: what the per-node functions would answer for it.
   */
  export interface ListedInstance {
    /**
     * The Kubernetes node name this instance serves: the node `instance-metadata` matches
     * to it when the node has no provider ID yet. Empty when the driver cannot say; the
     * host then matches the instance to a node by provider ID only.
     */
    nodeName: string,
    /**
     * What `instance-metadata` answers for it. The provider ID is never empty.
     */
    metadata: InstanceMetadata,
    /**
     * What `instance-shutdown` answers for it.
     */
    shutdown: boolean,
  }
  /**
   * One page of a listing.
   */
  export interface InstancePage {
    /**
     * At most 20,000 instances.
     */
    instances: Array<ListedInstance>,
    /**
     * Where the next page starts, opaque to the host (at most 1,024 bytes); `none` on the
     * last page.
     */
    next?: string,
  }
}
