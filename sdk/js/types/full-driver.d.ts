/// <reference path="./interfaces/wasm-ccm-provider-cluster.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-environment.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-http.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-instance-listing.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-instances.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-load-balancer.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-log.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-provider.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-routes.d.ts" />
/// <reference path="./interfaces/wasm-ccm-provider-types.d.ts" />
declare module 'wasm-ccm:provider/full-driver@0.2.2' {
  export type * as WasmCcmProviderCluster022 from 'wasm-ccm:provider/cluster@0.2.2'; // import wasm-ccm:provider/cluster@0.2.2
  export type * as WasmCcmProviderHttp022 from 'wasm-ccm:provider/http@0.2.2'; // import wasm-ccm:provider/http@0.2.2
  export type * as WasmCcmProviderLog022 from 'wasm-ccm:provider/log@0.2.2'; // import wasm-ccm:provider/log@0.2.2
  export type * as WasmCcmProviderTypes022 from 'wasm-ccm:provider/types@0.2.2'; // import wasm-ccm:provider/types@0.2.2
  export * as routes from 'wasm-ccm:provider/routes@0.2.2'; // export wasm-ccm:provider/routes@0.2.2
  export * as loadBalancer from 'wasm-ccm:provider/load-balancer@0.2.2'; // export wasm-ccm:provider/load-balancer@0.2.2
  export * as provider from 'wasm-ccm:provider/provider@0.2.2'; // export wasm-ccm:provider/provider@0.2.2
  export * as environment from 'wasm-ccm:provider/environment@0.2.2'; // export wasm-ccm:provider/environment@0.2.2
  export * as instances from 'wasm-ccm:provider/instances@0.2.2'; // export wasm-ccm:provider/instances@0.2.2
  export * as instanceListing from 'wasm-ccm:provider/instance-listing@0.2.2'; // export wasm-ccm:provider/instance-listing@0.2.2
}
