// Types of the wasm-ccm JavaScript SDK. The WIT records (Node, Service, InstanceMetadata, …) are
// in types/, generated from wit/ by `jco guest-types wit -n full-driver -o sdk/js/types`.
/// <reference path="./types/full-driver.d.ts" />
import type {
  Ingress, NodeAddress, SecretDecl, SecretLocation, SecretOrigin, SecretUse,
} from 'wasm-ccm:provider/types@0.2.2';
import type { Node, NodeSet, Service } from 'wasm-ccm:provider/types@0.2.2';
import type { AddressClaim } from 'wasm-ccm:provider/cluster@0.2.2';
import type { InstancePage } from 'wasm-ccm:provider/instance-listing@0.2.2';

/** Base of every error a driver returns to the host; `payload` is the WIT `provider-error`. */
export class ProviderError extends Error {
  constructor(tag: string, val?: unknown);
  readonly payload: { tag: string; val?: unknown };
  readonly tag: string;
}
export class NotFound extends ProviderError { constructor(message: string); }
export class Unimplemented extends ProviderError { constructor(); }
export class ImplementedElsewhere extends ProviderError { constructor(); }
export class InvalidConfig extends ProviderError { constructor(message: string); }
export class Unauthorized extends ProviderError { constructor(message: string); }
export class RateLimited extends ProviderError { constructor(seconds?: number); }
export class RetryAfter extends ProviderError { constructor(seconds: number, reason: string); }
export class Transient extends ProviderError { constructor(message: string); }
export class Permanent extends ProviderError { constructor(message: string); }

type Fields = Record<string, unknown>;
export const log: {
  trace(message: string, fields?: Fields): void;
  debug(message: string, fields?: Fields): void;
  info(message: string, fields?: Fields): void;
  warn(message: string, fields?: Fields): void;
  error(message: string, fields?: Fields): void;
  /** Masks `secret` in every later log line, error, event and answer of this driver. */
  redact(secret: string): void;
};

export const cluster: {
  /** Every Service of type LoadBalancer (each call copies all of them; prefer the queries). */
  loadBalancerServices(): Service[];
  /** The LoadBalancer Services carrying annotation `key` (with one of `values`, when given). */
  servicesWithAnnotation(key: string, values?: string[]): Service[];
  /** The LoadBalancer Services using one of `ips` as loadBalancerIP or ingress IP. */
  servicesWithAddress(ips: string[]): Service[];
  /** Which of `ips` the LoadBalancer Services hold (loadBalancerIP, ingress IP or `annotation`). */
  addressClaims(ips: string[], annotation?: string): AddressClaim[];
  /** The nodes of an `ensure`/`update` node set, fetched from the host once per generation.
   * `defineInterface` calls it: a driver's `ensure(service, nodes)` receives the nodes. */
  nodesOf(nodeSet: NodeSet): Node[];
  /** A Normal event on the object of the current call. */
  normal(reason: string, message: string): void;
  /** A Warning event on the object of the current call. */
  warning(reason: string, message: string): void;
};

export interface RequestOptions {
  headers?: Array<[string, string]>;
  body?: Uint8Array;
  /** Serialised as the body, with `content-type: application/json`. */
  json?: unknown;
  /** Sent as `authorization: Bearer …`. */
  bearer?: string;
  timeoutMs?: number;
}

export class Response {
  readonly url: string;
  readonly status: number;
  readonly headers: Array<[string, string]>;
  readonly body: Uint8Array;
  header(name: string): string | undefined;
  text(): string;
  /** The body as JSON; a body that is not JSON throws Transient. */
  json(): any;
  /** Itself below 400; else throws: 404 NotFound, 401/403 Unauthorized, 429 RateLimited,
   * 5xx Transient, other 4xx Permanent. */
  errorForStatus(): Response;
}

export function send(method: string, url: string, options?: RequestOptions): Response;
export const http: {
  send: typeof send;
  get(url: string, options?: RequestOptions): Response;
  put(url: string, options?: RequestOptions): Response;
  post(url: string, options?: RequestOptions): Response;
  delete(url: string, options?: RequestOptions): Response;
};

/** Wraps an exported interface: ProviderErrors reach the host as WIT errors, other exceptions
 * are logged with their stack before the call traps, bool results are checked. */
export function defineInterface<T extends object>(name: string, impl: T): T;
/** The default `environment` export (contract 0.2.1): declares no plain variables, so `init`
 * gets every variable with one of the driver's `envPrefixes`. Define your own to get an
 * allow-list. */
export const environment: { plainVariables(): string[] | undefined };
/** The default `instanceListing` export (contract 0.2.2): answers with the `listInstances(page)`
 * of the driver's `instances` (made with `defineInterface`), and throws `Unimplemented` when it
 * has none, so the host keeps asking per node. `page` is undefined for the first page, else the
 * `next` of the page before; each listed instance carries what `instanceMetadata` and
 * `instanceShutdown` answer for it. */
export const instanceListing: { listInstances(page: string | undefined): InstancePage };

/** The value of `key` in a WIT list of string pairs (labels, annotations). */
export function lookup(pairs: Array<[string, string]>, key: string): string | undefined;
/** An ingress entry for a VIP address. */
export function vip(ip: string): Ingress;
/** An ingress entry for a DNS name. */
export function hostnameIngress(hostname: string): Ingress;
/** Kubernetes' address type names → the WIT enum. */
export const ADDRESS_TYPES: Record<string, NodeAddress['kind']>;
/** Constructors of `ProviderInfo.secrets`: the credentials the driver declares, so that the host
 * keeps them out of the guest (`init` receives placeholders; the host applies the values). */
export const secret: {
  /** The environment variable `name` (it must start with one of the `envPrefixes`). */
  env(name: string): SecretLocation;
  /** Key `key` of section `section` of an INI `--cloud-config` file. */
  ini(section: string, key: string): SecretLocation;
  /** The string member at JSON Pointer `pointer` (e.g. `/clientSecret`) of a JSON config. */
  json(pointer: string): SecretLocation;
  /** The URL in the first present of `settings`, else `defaultUrl` (empty: a setting is required). */
  origin(settings: SecretLocation[], defaultUrl?: string): SecretOrigin;
  /** `Authorization: Bearer <secret>`. */
  bearer(): SecretUse;
  /** The whole value of header `name`. */
  header(name: string): SecretUse;
  /** Query parameter or form field `name`. */
  param(name: string): SecretUse;
  /** The user of `Authorization: Basic`. */
  basicUser(): SecretUse;
  /** The password of `Authorization: Basic`. */
  basicPassword(): SecretUse;
  /** The key the host signs CloudStack requests with. */
  cloudstackSignature(): SecretUse;
  /** An OAuth2 client-credentials token endpoint; the host seals the access token and sends it
   * only as a bearer token to `tokenOrigins`. */
  oauth2Client(tokenPath: string, tokenOrigins: SecretOrigin[]): SecretUse;
  /** A secret named `name` (`[a-z0-9-]`) found at `at`, sent only to `origin`, as `uses` says. */
  decl(name: string, at: SecretLocation[], origin: SecretOrigin, uses: SecretUse[]): SecretDecl;
};
/** `url` without query, fragment or credentials, for messages. */
export function displayUrl(url: string): string;
/** Percent-encodes everything but RFC 3986's unreserved characters. */
export function encodePathSegment(segment: string): string;
export function encodeUtf8(text: string): Uint8Array;
export function decodeUtf8(bytes: Uint8Array, fatal?: boolean): string;
/** The body as text, whitespace collapsed, cut at 512 characters, for messages. */
export function bodySnippet(body: Uint8Array): string;
