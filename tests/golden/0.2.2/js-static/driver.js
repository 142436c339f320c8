// The static reference driver (drivers/static) written in JavaScript: the same cloud-config, the
// same behaviour, the same conformance scenario.
//
// Build (see sdk/README.md, "Write a driver in JavaScript"):
//   npm install
//   npx jco componentize driver.js --wit ../../../wit -n full-driver --disable http fetch-event \
//       --bundle --bundle-config node_modules/wasm-ccm-sdk/bundle.config.mjs -o js_static.wasm
import YAML from 'yaml';
import ipaddr from 'ipaddr.js';
import {
  ADDRESS_TYPES, InvalidConfig, NotFound, Permanent, cluster, decodeUtf8, defineInterface, displayUrl,
  encodePathSegment, hostnameIngress, http, log, lookup, vip,
} from 'wasm-ccm-sdk';

const SCHEME = 'static';
const IP_ANNOTATION = 'static.wasm-ccm.io/load-balancer-ip';
const TOKEN_ENV = 'STATIC_INVENTORY_TOKEN';
const INVENTORY_TIMEOUT_MS = 5000;
// Instances in one page of the listing, as the Rust driver (the contract allows 20,000).
const PAGE_SIZE = 1000;

let CONFIG = null; // set by init; one copy per component instance

// ------------------------------------------------------------------ addresses

class Invalid extends Error {}

/** Strict parse: four-part decimal IPv4 or IPv6; null otherwise. */
function parseIp(s) {
  if (typeof s !== 'string') return null;
  s = s.trim();
  if (s.includes(':')) return ipaddr.IPv6.isValid(s) ? ipaddr.IPv6.parse(s) : null;
  return ipaddr.IPv4.isValidFourPartDecimal(s) ? ipaddr.IPv4.parse(s) : null;
}
const v6 = (ip) => ip.kind() === 'ipv6';
const toNum = (ip) => ip.toByteArray().reduce((n, b) => (n << 8n) | BigInt(b), 0n);
function fromNum(isV6, n) {
  const bytes = new Array(isV6 ? 16 : 4);
  for (let i = bytes.length - 1; i >= 0; i--) { bytes[i] = Number(n & 0xffn); n >>= 8n; }
  return ipaddr.fromByteArray(bytes);
}
const ipKey = (ip) => `${ip.kind()}/${toNum(ip)}`;
const ipString = (ip) => (v6(ip) ? ip.toRFC5952String() : ip.toString());

function parseCidr(s) {
  const slash = s.indexOf('/');
  if (slash < 0) throw new Invalid(`${JSON.stringify(s)} is not a CIDR (address/prefix-length)`);
  const addr = s.slice(0, slash), len = s.slice(slash + 1);
  const ip = parseIp(addr);
  if (!ip) throw new Invalid(`${JSON.stringify(s)}: ${JSON.stringify(addr)} is not an IP address`);
  const max = v6(ip) ? 128 : 32;
  if (!/^\d+$/.test(len) || Number(len) > max) throw new Invalid(`${JSON.stringify(s)}: prefix length must be 0..=${max}`);
  const hostBits = BigInt(max - Number(len));
  const mask = (1n << hostBits) - 1n;
  const n = toNum(ip);
  if ((n & mask) !== 0n) {
    throw new Invalid(`${JSON.stringify(s)} has host bits set; did you mean ${ipString(fromNum(v6(ip), n & ~mask))}/${len}?`);
  }
  return { v6: v6(ip), first: n, last: n | mask, len: Number(len) };
}

class Pool {
  constructor(entries) {
    this.ranges = [];
    list(entries, 'loadBalancer.addresses').forEach((e, i) => {
      const path = `loadBalancer.addresses[${i}]`;
      e = str(e, path).trim();
      try {
        if (e.includes('/')) {
          const r = parseCidr(e);
          if (!r.v6 && r.len <= 30) { r.first += 1n; r.last -= 1n; }
          this.ranges.push(r);
        } else {
          const ip = parseIp(e);
          if (!ip) throw new Invalid(`${JSON.stringify(e)} is not an IP address or a CIDR`);
          this.ranges.push({ v6: v6(ip), first: toNum(ip), last: toNum(ip) });
        }
      } catch (err) {
        if (err instanceof Invalid) throw new Invalid(`${path}: ${err.message}`);
        throw err;
      }
    });
  }
  get empty() { return this.ranges.length === 0; }
  contains(ip) { const n = toNum(ip); return this.ranges.some((r) => r.v6 === v6(ip) && r.first <= n && n <= r.last); }
  /** Every address of the pool in configuration order, of `family` ('ipv4'/'ipv6') if given. */
  *addresses(family) {
    for (const r of this.ranges) {
      if (family !== undefined && r.v6 !== (family === 'ipv6')) continue;
      for (let n = r.first; n <= r.last; n++) yield fromNum(r.v6, n);
    }
  }
}

// ------------------------------------------------------------------ configuration

function checkKeys(obj, allowed, path) {
  if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
    throw new Invalid(`${path || 'cloud-config'}: expected a mapping`);
  }
  for (const k of Object.keys(obj)) {
    if (!allowed.includes(k)) {
      throw new Invalid(`${path ? `${path}: ` : ''}unknown field \`${k}\`, expected one of ${allowed.map((a) => `\`${a}\``).join(', ')}`);
    }
  }
}
function str(v, path, dflt = '') {
  if (v === undefined || v === null) return dflt;
  if (typeof v === 'string') return v;
  if (typeof v === 'number') return String(v);
  throw new Invalid(`${path}: expected a string`);
}
function list(v, path) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Invalid(`${path}: expected a sequence`);
  return v;
}

function validateInstances(raw, defaults) {
  const names = new Set(), ids = new Set();
  return list(raw, 'instances').map((r, i) => {
    const path = `instances[${i}]`;
    checkKeys(r, ['name', 'id', 'type', 'zone', 'region', 'addresses', 'shutdown', 'labels'], path);
    if (!('name' in r)) throw new Invalid(`${path}: missing field \`name\``);
    const name = str(r.name, `${path}.name`);
    if (!name.trim()) throw new Invalid(`${path}.name: must not be empty`);
    if (names.has(name)) throw new Invalid(`${path}.name: duplicate instance name ${JSON.stringify(name)}`);
    names.add(name);
    const id = str(r.id, `${path}.id`, name);
    if (!id || /[\s/]/.test(id)) throw new Invalid(`${path}.id: ${JSON.stringify(id)} is not usable in a provider ID (non-empty, no spaces or slashes)`);
    if (ids.has(id)) throw new Invalid(`${path}.id: duplicate instance id ${JSON.stringify(id)}`);
    ids.add(id);
    const addresses = list(r.addresses, `${path}.addresses`).map((a, j) => {
      const apath = `${path}.addresses[${j}]`;
      checkKeys(a, ['type', 'address'], apath);
      const typeName = str(a.type, `${apath}.type`);
      const kind = ADDRESS_TYPES[typeName];
      if (!Object.hasOwn(ADDRESS_TYPES, typeName)) {
        throw new Invalid(`${apath}.type: unknown address type ${JSON.stringify(typeName)}; use one of ${Object.keys(ADDRESS_TYPES).join(', ')}`);
      }
      const address = str(a.address, `${apath}.address`);
      if ((kind === 'internal-ip' || kind === 'external-ip') && !parseIp(address)) {
        throw new Invalid(`${apath}.address: ${JSON.stringify(address)} is not an IP address (type ${typeName})`);
      }
      if (!address) throw new Invalid(`${apath}.address: must not be empty`);
      return { kind, address };
    });
    const shutdown = r.shutdown ?? false;
    if (typeof shutdown !== 'boolean') throw new Invalid(`${path}.shutdown: expected a boolean`);
    const labels = r.labels ?? {};
    checkKeys(labels, Object.keys(labels), `${path}.labels`);
    return {
      name, id, type: str(r.type, `${path}.type`),
      zone: str(r.zone, `${path}.zone`, defaults.zone),
      region: str(r.region, `${path}.region`, defaults.region),
      addresses, shutdown,
      labels: Object.keys(labels).sort().map((k) => [k, str(labels[k], `${path}.labels.${k}`)]),
    };
  });
}

function validateRoutes(raw) {
  const names = new Set();
  return list(raw, 'routes').map((r, i) => {
    checkKeys(r, ['name', 'targetNode', 'destinationCidr', 'blackhole'], `routes[${i}]`);
    const name = str(r.name, `routes[${i}].name`);
    if (!name) throw new Invalid(`routes[${i}].name: must not be empty`);
    if (names.has(name)) throw new Invalid(`routes[${i}].name: duplicate route name ${JSON.stringify(name)}`);
    names.add(name);
    const destinationCidr = str(r.destinationCidr, `routes[${i}].destinationCidr`);
    try { parseCidr(destinationCidr); } catch (e) {
      if (e instanceof Invalid) throw new Invalid(`routes[${i}].destinationCidr: ${e.message}`);
      throw e;
    }
    return { name, targetNode: str(r.targetNode, `routes[${i}].targetNode`), targetNodeAddresses: [], destinationCidr, blackhole: r.blackhole === true };
  });
}

const isDnsName = (s) => s.length > 0 && s.length <= 253 &&
  s.split('.').every((l) => l.length > 0 && l.length <= 63 && !l.startsWith('-') && !l.endsWith('-') && /^[A-Za-z0-9-]+$/.test(l));

function parseConfig(bytes, env) {
  let text;
  try { text = decodeUtf8(bytes, true); } catch (e) {
    throw new Invalid(`cloud-config is not UTF-8: ${e.message}`);
  }
  let raw = {};
  if (text.trim()) {
    try { raw = YAML.parse(text) ?? {}; } catch (e) { throw new Invalid(`cloud-config: ${e.message}`); }
  }
  checkKeys(raw, ['region', 'zone', 'instances', 'loadBalancer', 'inventoryUrl', 'inventoryToken', 'routes'], '');
  const defaults = { region: str(raw.region, 'region'), zone: str(raw.zone, 'zone') };
  const envToken = lookup(env, TOKEN_ENV) || undefined;
  const cfg = { defaults, url: undefined, token: undefined, instances: [], routes: [] };
  if (raw.inventoryUrl !== undefined && raw.inventoryUrl !== null) {
    if (list(raw.instances, 'instances').length) throw new Invalid('instances: not allowed together with inventoryUrl (the inventory serves the instances)');
    if (list(raw.routes, 'routes').length) throw new Invalid('routes: not allowed together with inventoryUrl (the inventory serves the routes)');
    const url = str(raw.inventoryUrl, 'inventoryUrl').replace(/\/+$/, '');
    if (!url.startsWith('http://') && !url.startsWith('https://')) {
      throw new Invalid(`inventoryUrl: ${JSON.stringify(url)} is not an http:// or https:// URL`);
    }
    cfg.url = url;
    cfg.token = envToken || str(raw.inventoryToken, 'inventoryToken') || undefined;
  } else {
    if (raw.inventoryToken !== undefined) throw new Invalid('inventoryToken: only meaningful with inventoryUrl');
    cfg.instances = validateInstances(raw.instances, defaults);
    cfg.routes = validateRoutes(raw.routes);
  }
  const lb = raw.loadBalancer ?? {};
  checkKeys(lb, ['addresses', 'hostnameSuffix'], 'loadBalancer');
  cfg.pool = new Pool(lb.addresses);
  cfg.suffix = undefined;
  if (lb.hostnameSuffix !== undefined && lb.hostnameSuffix !== null) {
    const s = str(lb.hostnameSuffix, 'loadBalancer.hostnameSuffix').replace(/^\.+|\.+$/g, '');
    if (!isDnsName(s)) throw new Invalid(`loadBalancer.hostnameSuffix: ${JSON.stringify(s)} is not a DNS name`);
    cfg.suffix = s;
  }
  return cfg;
}

// ------------------------------------------------------------------ instances

function currentInstances() {
  if (!CONFIG.url) return CONFIG.instances;
  const url = `${CONFIG.url}/instances`;
  const doc = http.get(url, { bearer: CONFIG.token, timeoutMs: INVENTORY_TIMEOUT_MS }).errorForStatus().json();
  try {
    checkKeys(doc, ['instances'], '');
    return validateInstances(doc.instances, CONFIG.defaults);
  } catch (e) {
    if (e instanceof Invalid) throw new InvalidConfig(`inventory ${displayUrl(url)}: ${e.message}`);
    throw e;
  }
}

function find(node) {
  const instances = currentInstances();
  if (!node.providerId) return instances.find((i) => i.name === node.name);
  const sep = node.providerId.indexOf('://');
  if (sep < 0) {
    throw new InvalidConfig(`node ${node.name} has provider ID ${JSON.stringify(node.providerId)}, which is not of the form <scheme>://<id>`);
  }
  const scheme = node.providerId.slice(0, sep), id = node.providerId.slice(sep + 3);
  if (scheme !== SCHEME) {
    throw new InvalidConfig(`node ${node.name} has provider ID ${JSON.stringify(node.providerId)}: it belongs to provider ${JSON.stringify(scheme)}, not to this ${SCHEME} driver`);
  }
  return instances.find((i) => i.id === id);
}

const notFound = (node) => new NotFound(node.providerId
  ? `no instance with provider ID ${JSON.stringify(node.providerId)} in the static inventory`
  : `no instance named ${JSON.stringify(node.name)} in the static inventory`);

/** What instanceMetadata answers for the instance, and the listing carries for it. */
const metadata = (i) => ({
  providerId: `${SCHEME}://${i.id}`, instanceType: i.type, zone: i.zone, region: i.region,
  addresses: i.addresses, additionalLabels: i.labels,
});

/** The offset a page token names (this driver writes the offset of the page's first instance in
 * decimal), at most `count`: an inventory served over HTTP may shrink between two pages down to
 * exactly the offset. Any other token is not ours, and retrying it cannot help. */
function pageStart(token, count) {
  if (/^[0-9]+$/.test(token) && Number(token) <= count) return Number(token);
  throw new Permanent(`page token ${JSON.stringify(token)} is not one this driver wrote for its ${count} instances: it writes the offset of the page's first instance in decimal`);
}

// The `environment` export (0.2.1): this driver declares no secrets and no plain variables, so
// it keeps every STATIC_ variable, as the SDK's default says.
export { environment } from 'wasm-ccm-sdk';
// The `instance-listing` export (0.2.2): the SDK's answers with `instances.listInstances`.
export { instanceListing } from 'wasm-ccm-sdk';

export const provider = defineInterface('provider', {
  info: () => ({
    name: 'static-javascript', version: '0.1.0', providerIdScheme: SCHEME, defaultEgress: [], envPrefixes: ['STATIC_'],
    annotationPrefixes: ['static.wasm-ccm.io/'],
    // The inventory token may sit in the YAML config, which no secret location names: it stays
    // in the guest, redacted from the log.
    secrets: [],
  }),
  init(ctx, config, env) {
    try {
      CONFIG = parseConfig(config, env);
    } catch (e) {
      if (e instanceof Invalid) throw new InvalidConfig(e.message);
      throw e;
    }
    if (CONFIG.token) log.redact(CONFIG.token);
    log.info('static driver configured', {
      cluster: ctx.clusterName, mode: CONFIG.url ? 'inventory' : 'static',
      instances: CONFIG.url ? displayUrl(CONFIG.url) : CONFIG.instances.length,
      'pool-empty': CONFIG.pool.empty,
    });
  },
  housekeeping() {},
});

export const instances = defineInterface('instances', {
  instanceExists: (node) => find(node) !== undefined,
  instanceShutdown(node) {
    const i = find(node);
    if (!i) throw notFound(node);
    return i.shutdown;
  },
  instanceMetadata(node) {
    const i = find(node);
    if (!i) throw notFound(node);
    return metadata(i);
  },
  // The same answers as the per-node functions, under the name `find` matches a node without a
  // provider ID by; an inventory served over HTTP is fetched again per page.
  listInstances(page) {
    const all = currentInstances();
    const start = page === undefined ? 0 : pageStart(page, all.length);
    const end = Math.min(start + PAGE_SIZE, all.length);
    return {
      instances: all.slice(start, end).map((i) => ({ nodeName: i.name, metadata: metadata(i), shutdown: i.shutdown })),
      next: end < all.length ? String(end) : undefined,
    };
  },
});

// ------------------------------------------------------------------ load balancers

const ingressIps = (svc) => svc.ingress.map((i) => parseIp(i.ip)).filter(Boolean);

function lbIngress(svc, ip) {
  if (CONFIG.suffix) return [hostnameIngress(`${svc.namespace}-${svc.name}.${CONFIG.suffix}`)];
  return ip ? [vip(ipString(ip))] : [];
}

// How many pool addresses the first query asks about, doubling up to the largest, so a fresh
// address deep in a busy pool takes few host calls.
const FIRST_CANDIDATES = 256;
const MAX_CANDIDATES = 4096;

/** The Services that may claim one of `ips`: only those are copied in, never every Service. */
function claims(ips) {
  const texts = ips.map(ipString);
  return [...cluster.servicesWithAddress(texts), ...cluster.servicesWithAnnotation(IP_ANNOTATION, texts)];
}

function takenByOthers(svc, others) {
  const taken = new Set();
  for (const o of others) {
    if (o.uid === svc.uid) continue;
    const a = parseIp(lookup(o.annotations, IP_ANNOTATION));
    if (a) taken.add(ipKey(a));
    for (const ip of ingressIps(o)) taken.add(ipKey(ip));
  }
  return taken;
}

function chooseIp(svc) {
  const pool = CONFIG.pool;
  if (pool.empty) throw new InvalidConfig('no load-balancer addresses configured: set loadBalancer.addresses in the cloud-config');
  const requested = (svc.loadBalancerIp ?? '').trim();
  if (requested) {
    const ip = parseIp(requested);
    if (!ip) throw new InvalidConfig(`spec.loadBalancerIP ${JSON.stringify(requested)} is not an IP address`);
    if (!pool.contains(ip)) throw new InvalidConfig(`spec.loadBalancerIP ${ipString(ip)} is not in the address pool (loadBalancer.addresses)`);
    if (takenByOthers(svc, claims([ip])).has(ipKey(ip))) throw new InvalidConfig(`spec.loadBalancerIP ${ipString(ip)} is already used by another service`);
    return ip;
  }
  const current = parseIp(lookup(svc.annotations, IP_ANNOTATION));
  if (current) {
    const published = new Set(claims([current]).filter((o) => o.uid !== svc.uid).flatMap(ingressIps).map(ipKey));
    if (pool.contains(current) && !published.has(ipKey(current))) return current;
  }
  const candidates = pool.addresses(svc.ipFamilies[0]);
  let asked = FIRST_CANDIDATES;
  let claimed = 0;
  for (;;) {
    const chunk = [];
    for (let next = candidates.next(); !next.done; next = candidates.next()) {
      chunk.push(next.value);
      if (chunk.length === asked) break;
    }
    if (chunk.length === 0) break;
    const taken = takenByOthers(svc, claims(chunk));
    const free = chunk.find((ip) => !taken.has(ipKey(ip)));
    if (free) return free;
    claimed += chunk.length;
    asked = Math.min(asked * 2, MAX_CANDIDATES);
  }
  const msg = `no free address left in the load-balancer pool for ${svc.namespace}/${svc.name} (${claimed} claimed by other services)`;
  cluster.warning('AddressPoolExhausted', msg);
  throw new Permanent(msg);
}

export const loadBalancer = defineInterface('load-balancer', {
  get(svc) {
    const ip = parseIp(lookup(svc.annotations, IP_ANNOTATION));
    if (ip) return lbIngress(svc, ip);
    if (CONFIG.suffix && CONFIG.pool.empty) {
      const expected = `${svc.namespace}-${svc.name}.${CONFIG.suffix}`;
      if (svc.ingress.some((i) => i.hostname === expected)) return [hostnameIngress(expected)];
    }
    return undefined;
  },
  name: (svc) => `a${svc.uid.replaceAll('-', '')}`.slice(0, 32),
  ensure(svc, _nodes) {
    const sctp = svc.ports.find((p) => p.protocol === 'sctp');
    if (sctp) {
      throw new InvalidConfig(`port ${sctp.port} (${sctp.name || 'unnamed'}) uses SCTP, which static load balancers do not support; use TCP or UDP`);
    }
    if (CONFIG.suffix && CONFIG.pool.empty) return { ingress: lbIngress(svc, null), setAnnotations: [], removeAnnotations: [] };
    const ip = chooseIp(svc);
    const result = { ingress: lbIngress(svc, ip), setAnnotations: [], removeAnnotations: [] };
    if (lookup(svc.annotations, IP_ANNOTATION) !== ipString(ip)) result.setAnnotations.push([IP_ANNOTATION, ipString(ip)]);
    return result;
  },
  update(svc, nodes) {
    log.debug('backend nodes changed; static load balancers have nothing to reconfigure', {
      service: `${svc.namespace}/${svc.name}`, nodes: nodes.length,
    });
  },
  delete(_svc) {},
});

// ------------------------------------------------------------------ routes

function inventoryForRoutes() {
  if (!CONFIG.url) throw new InvalidConfig('routes from the cloud-config are read-only: creating or deleting routes needs an inventoryUrl');
  return [CONFIG.url, CONFIG.token];
}

export const routes = defineInterface('routes', {
  list() {
    if (!CONFIG.url) return CONFIG.routes;
    const url = `${CONFIG.url}/routes`;
    const doc = http.get(url, { bearer: CONFIG.token, timeoutMs: INVENTORY_TIMEOUT_MS }).errorForStatus().json();
    try {
      checkKeys(doc, ['routes'], '');
      return validateRoutes(doc.routes);
    } catch (e) {
      if (e instanceof Invalid) throw new InvalidConfig(`inventory ${displayUrl(url)}: ${e.message}`);
      throw e;
    }
  },
  create(nameHint, route) {
    const [base, token] = inventoryForRoutes();
    http.put(`${base}/routes/${encodePathSegment(nameHint)}`, {
      json: { name: nameHint, targetNode: route.targetNode, destinationCidr: route.destinationCidr },
      bearer: token, timeoutMs: INVENTORY_TIMEOUT_MS,
    }).errorForStatus();
  },
  delete(route) {
    const [base, token] = inventoryForRoutes();
    try {
      http.delete(`${base}/routes/${encodePathSegment(route.name)}`, { bearer: token, timeoutMs: INVENTORY_TIMEOUT_MS }).errorForStatus();
    } catch (e) {
      if (!(e instanceof NotFound)) throw e;
    }
  },
});
