// wasm-ccm driver SDK for JavaScript, over the imports `jco componentize` links from `wit/`.
//
// - Errors: throw `NotFound`, `InvalidConfig`, … (subclasses of `ProviderError`); the host gets
//   the WIT `provider-error` they name. componentize-js maps a thrown object with a `payload`
//   onto the error case of a WIT `result`; anything else traps.
// - `defineInterface` wraps an exported interface: a bug (any other exception) is logged with its
//   stack through the host's log before the call traps, and a function whose WIT result is a
//   bool must return one (`instanceExists` answering `undefined` would read as false, and the
//   host would delete the Node).
// - `http` is a small fetch-like client over the host's `http` import, `log` writes to the host's
//   log, `cluster` reads the cluster view and records events.
import * as hostHttp from 'wasm-ccm:provider/http@0.2.2';
import * as hostLog from 'wasm-ccm:provider/log@0.2.2';
import * as hostCluster from 'wasm-ccm:provider/cluster@0.2.2';
import { decodeUtf8, encodeUtf8 } from './utf8.js';
export { decodeUtf8, encodeUtf8 };

// ------------------------------------------------------------------ errors

/** Base of every error a driver returns to the host: `payload` is the WIT `provider-error`. */
export class ProviderError extends Error {
  constructor(tag, val) {
    super(val === undefined ? tag : `${tag}: ${typeof val === 'object' ? JSON.stringify(val) : val}`);
    this.payload = val === undefined ? { tag } : { tag, val };
  }
  get tag() { return this.payload.tag; }
}
/** The instance or load balancer does not exist (the host may delete the Node). */
export class NotFound extends ProviderError { constructor(msg) { super('not-found', msg); } }
/** This driver does not implement the function. */
export class Unimplemented extends ProviderError { constructor() { super('not-implemented'); } }
/** Another controller owns the object. */
export class ImplementedElsewhere extends ProviderError { constructor() { super('implemented-elsewhere'); } }
/** The cloud-config, an annotation or a Service field is wrong: say which and how to fix it. */
export class InvalidConfig extends ProviderError { constructor(msg) { super('invalid-config', msg); } }
/** The cloud refused the credentials. */
export class Unauthorized extends ProviderError { constructor(msg) { super('unauthorized', msg); } }
/** The cloud throttled us; `seconds` is its Retry-After, if it gave one. */
export class RateLimited extends ProviderError { constructor(seconds) { super('rate-limited', seconds); } }
/** Work is under way in the cloud; ask again in `seconds`. */
export class RetryAfter extends ProviderError { constructor(seconds, reason) { super('retry-after', { seconds, reason }); } }
/** A failure worth retrying with backoff. */
export class Transient extends ProviderError { constructor(msg) { super('transient', msg); } }
/** A failure retrying will not fix. */
export class Permanent extends ProviderError { constructor(msg) { super('permanent', msg); } }

// ------------------------------------------------------------------ log, cluster

const fields = (kv) => Object.entries(kv ?? {}).map(([k, v]) => [k, String(v)]);
export const log = {
  trace: (msg, kv) => hostLog.log('trace', msg, fields(kv)),
  debug: (msg, kv) => hostLog.log('debug', msg, fields(kv)),
  info: (msg, kv) => hostLog.log('info', msg, fields(kv)),
  warn: (msg, kv) => hostLog.log('warn', msg, fields(kv)),
  error: (msg, kv) => hostLog.log('error', msg, fields(kv)),
  redact: (secret) => hostLog.redact(secret),
};

// The nodes of the last node-set generation fetched: an instance lives for many calls, so an
// unchanged set is copied in once, not once per Service.
let cachedNodes = { generation: undefined, nodes: [] };

export const cluster = {
  /** Every LoadBalancer Service (each call copies all of them; prefer the two queries). */
  loadBalancerServices: () => hostCluster.loadBalancerServices(),
  /** The LoadBalancer Services carrying annotation `key` (with one of `values`, when given). */
  servicesWithAnnotation: (key, values = []) => hostCluster.servicesWithAnnotation(key, values),
  /** The LoadBalancer Services using one of `ips` as loadBalancerIP or ingress IP. */
  servicesWithAddress: (ips) => hostCluster.servicesWithAddress(ips),
  /** Which of `ips` the LoadBalancer Services hold (as loadBalancerIP, ingress IP or the value of
   * `annotation`): `{ ip, serviceUid, usedAs }` records, for an address pool asking about many. */
  addressClaims: (ips, annotation = '') => hostCluster.addressClaims(ips, annotation),
  /** The nodes of an `ensure`/`update` node set, fetched once per generation
   * (`defineInterface` calls it, so a driver's `ensure` and `update` receive the nodes). */
  nodesOf: (nodeSet) => {
    if (cachedNodes.generation !== nodeSet.generation) {
      cachedNodes = { generation: nodeSet.generation, nodes: hostCluster.nodes() };
    }
    return cachedNodes.nodes;
  },
  normal: (reason, message) => hostCluster.event('normal', reason, message),
  warning: (reason, message) => hostCluster.event('warning', reason, message),
};

// ------------------------------------------------------------------ helpers for WIT shapes

export const lookup = (pairs, key) => pairs.find(([k]) => k === key)?.[1];
export const vip = (ip) => ({ ip, hostname: undefined, ipMode: 'vip' });
export const hostnameIngress = (hostname) => ({ ip: undefined, hostname, ipMode: undefined });
export const ADDRESS_TYPES = {
  Hostname: 'hostname', InternalIP: 'internal-ip', ExternalIP: 'external-ip',
  InternalDNS: 'internal-dns', ExternalDNS: 'external-dns',
};

// Constructors of `info().secrets`: the credentials a driver declares so that the host keeps
// them out of the guest. Plain objects in jco's shape ({tag, val}, camelCase fields).
export const secret = {
  env: (name) => ({ tag: 'env', val: name }),
  ini: (section, key) => ({ tag: 'ini', val: [section, key] }),
  json: (pointer) => ({ tag: 'json', val: pointer }),
  origin: (settings, defaultUrl = '') => ({ settings, defaultUrl }),
  bearer: () => ({ tag: 'bearer' }),
  header: (name) => ({ tag: 'header', val: name }),
  param: (name) => ({ tag: 'param', val: name }),
  basicUser: () => ({ tag: 'basic-user' }),
  basicPassword: () => ({ tag: 'basic-password' }),
  cloudstackSignature: () => ({ tag: 'cloudstack-signature' }),
  oauth2Client: (tokenPath, tokenOrigins) => ({ tag: 'oauth2-client', val: { tokenPath, tokenOrigins } }),
  decl: (name, at, origin, uses) => ({ name, at, origin, uses }),
};

// ------------------------------------------------------------------ http

const BODY_SNIPPET_LIMIT = 512;

export function displayUrl(url) {
  const bare = url.split(/[?#]/)[0];
  const i = bare.indexOf('://');
  if (i < 0) return bare;
  const rest = bare.slice(i + 3);
  const slash = rest.indexOf('/');
  const authority = slash < 0 ? rest : rest.slice(0, slash);
  const path = slash < 0 ? '' : rest.slice(slash);
  return `${bare.slice(0, i)}://${authority.split('@').pop()}${path}`;
}

export function bodySnippet(body) {
  const text = decodeUtf8(body).split(/\s+/).filter(Boolean).join(' ');
  return text.length <= BODY_SNIPPET_LIMIT ? text : `${text.slice(0, BODY_SNIPPET_LIMIT)}…`;
}

export const encodePathSegment = (s) =>
  Array.from(encodeUtf8(s), (b) =>
    /[A-Za-z0-9\-_.~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');

export class Response {
  constructor(url, r) { Object.assign(this, { url, status: r.status, headers: r.headers, body: r.body }); }
  header(name) { name = name.toLowerCase(); return this.headers.find(([k]) => k.toLowerCase() === name)?.[1]; }
  text() { return decodeUtf8(this.body); }
  json() {
    try { return JSON.parse(this.text()); } catch (e) {
      throw new Transient(`unexpected response from ${displayUrl(this.url)}: expected JSON: ${e.message}; body: ${bodySnippet(this.body)}`);
    }
  }
  errorForStatus() {
    const s = this.status;
    if (s < 400) return this;
    const snippet = bodySnippet(this.body);
    const msg = `HTTP ${s} from ${displayUrl(this.url)}${snippet ? `: ${snippet}` : ''}`;
    if (s === 404) throw new NotFound(msg);
    if (s === 401 || s === 403) throw new Unauthorized(msg);
    if (s === 429) {
      const ra = (this.header('retry-after') ?? '').trim();
      throw new RateLimited(/^\d+$/.test(ra) ? Number(ra) : undefined);
    }
    if (s >= 500 && s <= 599) throw new Transient(msg);
    throw new Permanent(msg);
  }
}

export function send(method, url, { headers = [], body = new Uint8Array(), json, bearer, timeoutMs } = {}) {
  headers = [...headers];
  if (json !== undefined) {
    body = encodeUtf8(JSON.stringify(json));
    headers.push(['content-type', 'application/json']);
  }
  if (bearer) headers.push(['authorization', `Bearer ${bearer}`]);
  try {
    return new Response(url, hostHttp.send({ method, url, headers, body, timeoutMs }));
  } catch (e) {
    const { tag, val } = e.payload ?? {};
    switch (tag) {
      case 'timeout': throw new Transient(`HTTP timeout: ${val}`);
      case 'connect': throw new Transient(`HTTP connect: ${val}`);
      case 'denied': throw new InvalidConfig(val);
      // The request body or the response: the host's text says which.
      case 'too-large': throw new Permanent(`HTTP too large: ${val}`);
      case 'invalid': throw new Permanent(`invalid HTTP request: ${val}`);
      default: throw e;
    }
  }
}

export const http = {
  send,
  get: (url, o) => send('get', url, o),
  put: (url, o) => send('put', url, o),
  post: (url, o) => send('post', url, o),
  delete: (url, o) => send('delete', url, o),
};

// ------------------------------------------------------------------ exports

// Functions whose WIT result is a bool, per interface.
const BOOL_RESULTS = { instances: ['instanceExists', 'instanceShutdown'] };
// Functions that take a node set (generation and count), per interface: the driver receives
// its nodes.
const NODE_SET_ARGS = { 'load-balancer': ['ensure', 'update'], loadBalancer: ['ensure', 'update'] };

// The driver's `instances` as `defineInterface` wrapped it: the default `instanceListing` answers
// with its `listInstances`.
let definedInstances;

/** Wraps an exported interface (`provider`, `instances`, `loadBalancer`, `routes`): a thrown
 * `ProviderError` reaches the host as its WIT error; anything else is a bug, logged with its
 * stack before the call traps; a bool result must be a bool. */
export function defineInterface(name, impl) {
  const bools = BOOL_RESULTS[name] ?? [];
  const nodeSets = NODE_SET_ARGS[name] ?? [];
  const out = {};
  for (const [fn, f] of Object.entries(impl)) {
    out[fn] = (...args) => {
      let result;
      try {
        if (nodeSets.includes(fn) && args[1]?.generation !== undefined) {
          args = [args[0], cluster.nodesOf(args[1])];
        }
        result = f(...args);
      } catch (e) {
        if (e instanceof ProviderError) throw e;
        hostLog.log('error', `driver bug in ${name}.${fn}: ${e?.name ?? typeof e}: ${e?.message ?? e}`,
          [['stack', String(e?.stack ?? '')]]);
        throw e;
      }
      if (bools.includes(fn) && typeof result !== 'boolean') {
        const message = `${name}.${fn} returned ${String(result)} (${typeof result}), not a boolean`;
        hostLog.log('error', `driver bug: ${message}`, []);
        throw new TypeError(message);
      }
      return result;
    };
  }
  if (name === 'instances') definedInstances = out;
  return out;
}

/** The default `environment` export (contract 0.2.1, in every world): declares no plain
 * variables, so `init` gets every variable with one of the driver's `envPrefixes`, as in 0.2.0.
 * Re-export it (`export { environment } from 'wasm-ccm-sdk'`), or define your own to get an
 * allow-list: `export const environment = defineInterface('environment', { plainVariables: () =>
 * ['EXAMPLE_REGION'] })` — then `init` gets only those, the places of the declared secrets and
 * their origins' settings. */
export const environment = defineInterface('environment', { plainVariables: () => undefined });

/** The default `instanceListing` export (contract 0.2.2, in every world): answers with the
 * `listInstances(page)` of the driver's `instances` (made with `defineInterface`), and with
 * not-implemented when it has none, so the host keeps asking per node. Re-export it
 * (`export { instanceListing } from 'wasm-ccm-sdk'`) and list where you look up: `page` is
 * undefined for the first page, else the `next` of the page before; each entry of
 * `{ instances: [{ nodeName, metadata, shutdown }], next }` is what `instanceMetadata` and
 * `instanceShutdown` answer for it, under the node name the per-node lookup matches. Not wrapped
 * itself: the wrapped `listInstances` has logged a bug already. */
export const instanceListing = {
  listInstances(page) {
    const list = definedInstances?.listInstances;
    if (list === undefined) throw new Unimplemented();
    return list(page);
  },
};
