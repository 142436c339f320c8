declare module 'wasm-ccm:provider/types@0.2.2' {
  /**
   * How long to wait before calling again, and why.
   */
  export interface Retry {
    seconds: number,
    reason: string,
  }
  /**
   * What a driver reports when a call did not succeed. The host maps each case onto the
   * controllers' requeue, backoff and events, so choose the case that says what happened.
   */
  export type ProviderError = ProviderErrorNotFound | ProviderErrorNotImplemented | ProviderErrorImplementedElsewhere | ProviderErrorInvalidConfig | ProviderErrorUnauthorized | ProviderErrorRateLimited | ProviderErrorRetryAfter | ProviderErrorTransient | ProviderErrorPermanent;
  /**
   * The object (instance, load balancer, route) does not exist in the cloud.
   */
  export interface ProviderErrorNotFound {
    tag: 'not-found',
    val: string,
  }
  /**
   * The driver does not implement this function.
   */
  export interface ProviderErrorNotImplemented {
    tag: 'not-implemented',
  }
  /**
   * Another component manages this object (e.g. an external LB controller): the host
   * treats ensure/update as a successful no-op and writes no status.
   */
  export interface ProviderErrorImplementedElsewhere {
    tag: 'implemented-elsewhere',
  }
  /**
   * The operator's configuration or an annotation on the object is wrong. The host emits a
   * Warning event with this message and retries slowly; fix the input to recover.
   */
  export interface ProviderErrorInvalidConfig {
    tag: 'invalid-config',
    val: string,
  }
  /**
   * The cloud refused the credentials (HTTP 401/403).
   */
  export interface ProviderErrorUnauthorized {
    tag: 'unauthorized',
    val: string,
  }
  /**
   * The cloud asked us to slow down (HTTP 429); seconds from Retry-After when known.
   */
  export interface ProviderErrorRateLimited {
    tag: 'rate-limited',
    val: number | undefined,
  }
  /**
   * Work is under way in the cloud (e.g. an LB still provisioning): call again after
   * exactly `seconds`. Never sleep inside a call; return this instead.
   */
  export interface ProviderErrorRetryAfter {
    tag: 'retry-after',
    val: Retry,
  }
  /**
   * A failure that may pass by itself (network, HTTP 5xx, timeouts): exponential backoff.
   */
  export interface ProviderErrorTransient {
    tag: 'transient',
    val: string,
  }
  /**
   * A failure that retrying will not fix without a change somewhere.
   */
  export interface ProviderErrorPermanent {
    tag: 'permanent',
    val: string,
  }
  /**
   * Kinds of node addresses, as in Kubernetes' `NodeAddressType`.
   * # Variants
   * 
   * ## `"hostname"`
   * 
   * ## `"internal-ip"`
   * 
   * ## `"external-ip"`
   * 
   * ## `"internal-dns"`
   * 
   * ## `"external-dns"`
   */
  export type AddressType = 'hostname' | 'internal-ip' | 'external-ip' | 'internal-dns' | 'external-dns';
  /**
   * One node address.
   */
  export interface NodeAddress {
    kind: AddressType,
    address: string,
  }
  /**
   * A taint on a node.
   */
  export interface Taint {
    key: string,
    value: string,
    /**
     * `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
     */
    effect: string,
  }
  /**
   * The parts of a Kubernetes Node a driver may need.
   */
  export interface Node {
    name: string,
    uid: string,
    /**
     * `spec.providerID`; empty while the node has none.
     */
    providerId: string,
    labels: Array<[string, string]>,
    annotations: Array<[string, string]>,
    /**
     * `status.addresses`, as the kubelet or the host reported them.
     */
    addresses: Array<NodeAddress>,
    taints: Array<Taint>,
    /**
     * The node's Ready condition is True.
     */
    ready: boolean,
  }
  /**
   * The backend nodes of a `load-balancer.ensure` or `update` call, by reference: the nodes
   * themselves come from `cluster.nodes` during that call. The host converts a node set once
   * per change and hands the same generation to every call while it is unchanged, so a driver
   * that keeps the nodes of the last generation it fetched copies them once per change, not
   * once per Service (the SDKs do this for you).
   */
  export interface NodeSet {
    /**
     * Equal generations mean equal node lists for the life of the host process; a new list
     * always gets a new generation.
     */
    generation: bigint,
    /**
     * How many nodes `cluster.nodes` returns during this call.
     */
    count: number,
  }
  /**
   * What the cloud knows about the instance behind a node (InstancesV2 `InstanceMetadata`).
   */
  export interface InstanceMetadata {
    /**
     * `<scheme>://<id>`, the scheme being `provider-info.provider-id-scheme`.
     */
    providerId: string,
    /**
     * Written to `node.kubernetes.io/instance-type`; empty for none.
     */
    instanceType: string,
    /**
     * Written to `topology.kubernetes.io/zone`; empty for none.
     */
    zone: string,
    /**
     * Written to `topology.kubernetes.io/region`; empty for none.
     */
    region: string,
    /**
     * The node's addresses in the order the cloud prefers them.
     */
    addresses: Array<NodeAddress>,
    /**
     * Extra node labels; keys under kubernetes.io or k8s.io are ignored by the host.
     */
    additionalLabels: Array<[string, string]>,
  }
  /**
   * Layer-4 protocol of a service port.
   * # Variants
   * 
   * ## `"tcp"`
   * 
   * ## `"udp"`
   * 
   * ## `"sctp"`
   */
  export type Protocol = 'tcp' | 'udp' | 'sctp';
  /**
   * One port of a Service.
   */
  export interface ServicePort {
    name: string,
    protocol: Protocol,
    port: number,
    /**
     * The node port traffic is sent to; 0 when none is allocated.
     */
    nodePort: number,
  }
  /**
   * `spec.externalTrafficPolicy`.
   * # Variants
   * 
   * ## `"cluster"`
   * 
   * ## `"local"`
   */
  export type TrafficPolicy = 'cluster' | 'local';
  /**
   * `spec.sessionAffinity`.
   * # Variants
   * 
   * ## `"none"`
   * 
   * ## `"client-ip"`
   */
  export type SessionAffinity = 'none' | 'client-ip';
  /**
   * An IP family of a Service.
   * # Variants
   * 
   * ## `"ipv4"`
   * 
   * ## `"ipv6"`
   */
  export type IpFamily = 'ipv4' | 'ipv6';
  /**
   * `status.loadBalancer.ingress[].ipMode`.
   * # Variants
   * 
   * ## `"vip"`
   * 
   * ## `"proxy"`
   */
  export type IpMode = 'vip' | 'proxy';
  /**
   * One entry of `status.loadBalancer.ingress`.
   */
  export interface Ingress {
    ip?: string,
    hostname?: string,
    ipMode?: IpMode,
  }
  /**
   * The parts of a Kubernetes Service of type LoadBalancer a driver may need.
   */
  export interface Service {
    namespace: string,
    name: string,
    uid: string,
    labels: Array<[string, string]>,
    annotations: Array<[string, string]>,
    ports: Array<ServicePort>,
    externalTrafficPolicy: TrafficPolicy,
    /**
     * `spec.healthCheckNodePort`; 0 when none.
     */
    healthCheckNodePort: number,
    /**
     * `spec.loadBalancerIP` (deprecated upstream, still honoured by many clouds).
     */
    loadBalancerIp?: string,
    /**
     * `spec.loadBalancerSourceRanges`, CIDRs.
     */
    loadBalancerSourceRanges: Array<string>,
    sessionAffinity: SessionAffinity,
    /**
     * `spec.sessionAffinityConfig.clientIP.timeoutSeconds`, when set.
     */
    sessionAffinityTimeout?: number,
    ipFamilies: Array<IpFamily>,
    /**
     * `spec.loadBalancerClass`, when set.
     */
    loadBalancerClass?: string,
    /**
     * `status.loadBalancer.ingress` as it is now.
     */
    ingress: Array<Ingress>,
  }
  /**
   * What `load-balancer.ensure` wants the host to write on the Service.
   */
  export interface EnsureResult {
    /**
     * The new `status.loadBalancer.ingress`.
     */
    ingress: Array<Ingress>,
    /**
     * Annotations to set on the Service (key, value).
     */
    setAnnotations: Array<[string, string]>,
    /**
     * Annotation keys to remove from the Service.
     */
    removeAnnotations: Array<string>,
  }
  /**
   * A route sending a pod CIDR to a node.
   */
  export interface Route {
    /**
     * The cloud's name or id for the route, as returned by `routes.list`.
     */
    name: string,
    /**
     * The node the traffic goes to.
     */
    targetNode: string,
    /**
     * The node's addresses, when the cloud tracks them.
     */
    targetNodeAddresses: Array<NodeAddress>,
    destinationCidr: string,
    /**
     * The route points at a node that no longer exists.
     */
    blackhole: boolean,
  }
  /**
   * Facts about the cluster, given once to `init`.
   */
  export interface Context {
    /**
     * `--cluster-name`.
     */
    clusterName: string,
    /**
     * The UID of the kube-system namespace: stable for the cluster's life.
     */
    clusterId: string,
    /**
     * The API server's version, e.g. `v1.31.2`.
     */
    kubernetesVersion: string,
  }
  /**
   * Where a credential sits in what the operator gives `init`. The host reads the value there
   * and hands `init` an opaque placeholder in its place (`wccm-secret.` and 32 hex digits);
   * every other byte of the config and the environment is unchanged.
   */
  export type SecretLocation = SecretLocationEnv | SecretLocationIni | SecretLocationJson;
  /**
   * An environment variable, by name; it must start with one of the `env-prefixes`.
   */
  export interface SecretLocationEnv {
    tag: 'env',
    val: string,
  }
  /**
   * A key of an INI `--cloud-config` file: section and key, e.g. `("Global", "secret-key")`.
   */
  export interface SecretLocationIni {
    tag: 'ini',
    val: [string, string],
  }
  /**
   * A string member of a JSON `--cloud-config` file, by JSON Pointer, e.g. `/clientSecret`.
   */
  export interface SecretLocationJson {
    tag: 'json',
    val: string,
  }
  /**
   * Where the host may send a credential: the origin (scheme, host, port) of a URL.
   */
  export interface SecretOrigin {
    /**
     * Settings holding that URL, the first present one wins (list the environment variable
     * before the file key when the environment wins, as upstream CCMs do).
     */
    settings: Array<SecretLocation>,
    /**
     * The URL when no setting is present, e.g. `https://api.cloudscale.ch`; empty: one of
     * `settings` must be present.
     */
    defaultUrl: string,
  }
  /**
   * The token endpoint of `secret-use.oauth2-client`.
   */
  export interface Oauth2Seal {
    /**
     * The endpoint's path, e.g. `/auth/realms/BMC/protocol/openid-connect/token`.
     */
    tokenPath: string,
    /**
     * Where the sealed access token may be sent, as a bearer token.
     */
    tokenOrigins: Array<SecretOrigin>,
  }
  /**
   * How the host puts a credential into a request toward its origin. A placeholder anywhere
   * else (another origin, another header or parameter, the path, the body) makes the host
   * refuse the request with `http-error.denied`.
   */
  export type SecretUse = SecretUseBearer | SecretUseHeader | SecretUseParam | SecretUseBasicUser | SecretUseBasicPassword | SecretUseCloudstackSignature | SecretUseOauth2Client;
  /**
   * `Authorization: Bearer <credential>`.
   */
  export interface SecretUseBearer {
    tag: 'bearer',
  }
  /**
   * The whole value of this header (case-insensitive name).
   */
  export interface SecretUseHeader {
    tag: 'header',
    val: string,
  }
  /**
   * This query parameter, or this field of an `application/x-www-form-urlencoded` body.
   */
  export interface SecretUseParam {
    tag: 'param',
    val: string,
  }
  /**
   * The user of `Authorization: Basic` (form-encoded first, as RFC 6749 §2.3.1 allows).
   */
  export interface SecretUseBasicUser {
    tag: 'basic-user',
  }
  /**
   * The password of `Authorization: Basic`.
   */
  export interface SecretUseBasicPassword {
    tag: 'basic-password',
  }
  /**
   * The key of CloudStack's request signature: the host removes any `signature` the
   * driver sent and signs the final parameters (`signatureversion=3` and an `expires`
   * at most 15 minutes ahead are required) of every request that carries one of the
   * driver's other credentials (the `apiKey`).
   */
  export interface SecretUseCloudstackSignature {
    tag: 'cloudstack-signature',
  }
  /**
   * An OAuth2 client-credentials token endpoint: a POST to `token-path` on the origin.
   * The host replaces the `access_token` of its JSON answer with a placeholder that it
   * sends only as `bearer` to `token-origins`, caches the token for its lifetime and
   * answers a repeated token request from that cache.
   */
  export interface SecretUseOauth2Client {
    tag: 'oauth2-client',
    val: Oauth2Seal,
  }
  /**
   * A credential the driver reads, declared so that the host can keep it out of the guest.
   */
  export interface SecretDecl {
    /**
     * Stable name (`access-token`); messages and metrics name the secret by it.
     */
    name: string,
    /**
     * Every place the value may be (each present one gets its own placeholder).
     */
    at: Array<SecretLocation>,
    /**
     * Where the host may send it.
     */
    origin: SecretOrigin,
    /**
     * How the host may put it into a request for `origin`.
     */
    uses: Array<SecretUse>,
  }
  /**
   * What a driver tells about itself. `info` must not need `init` and must not make requests.
   */
  export interface ProviderInfo {
    /**
     * Short name, e.g. `cloudscale`; the `--cloud-provider` value.
     */
    name: string,
    /**
     * The driver's own version (semver).
     */
    version: string,
    /**
     * The scheme of the provider IDs it returns, e.g. `cloudscale` for `cloudscale://…`.
     */
    providerIdScheme: string,
    /**
     * Egress the driver needs by default, as `scheme://host[:port]` patterns; the operator's
     * `--allow-egress` replaces them.
     */
    defaultEgress: Array<string>,
    /**
     * Prefixes of the environment variables the host passes to `init` (e.g. `CLOUDSCALE_`):
     * at least 3 characters, ending in `_`, never a well-known process prefix.
     */
    envPrefixes: Array<string>,
    /**
     * Prefixes of the Service annotation keys the driver may set or remove through
     * `ensure-result` (e.g. `k8s.cloudscale.ch/`, or one full key). Every other key is
     * refused by the host, and keys under `kubernetes.io`/`k8s.io` only when named here.
     */
    annotationPrefixes: Array<string>,
    /**
     * The credentials the driver reads. The host hands `init` placeholders in their place
     * and applies the real values to requests for their origin, in their uses only; a
     * driver that declares none gets its credentials in clear (and `inspect` warns).
     */
    secrets: Array<SecretDecl>,
  }
}
