// The {{name}} wasm-ccm driver: node initialisation and lifecycle over an inventory API.
//
// As generated, the "cloud" is the inventory API of wasm-ccm-dev's `static` simulator
// (`GET /instances`, bearer token), so the driver passes `wasm-ccm-dev conformance` as it is.
// Make it yours: replace `fetchInstances` and the instance fields with your cloud's API and keep
// the rest: the configuration checks in `init`, the lookup rules and the error mapping are what
// the conformance checks expect.
//
// Build: ./build.sh (jco componentize bundles this module and the SDK into one component).
import {
  ADDRESS_TYPES, InvalidConfig, NotFound, Permanent, Transient, defineInterface, displayUrl, http, log,
} from '../wasm-ccm/sdk/js/index.js';

// Provider IDs are `{{name}}://<id>`: the scheme is stored on every Node, so choose it once.
const SCHEME = '{{name}}';
// One request may take this long; well inside the host's 30 s call deadline.
const TIMEOUT_MS = 5000;

let STATE = null; // set by init; one copy per component instance

/** Every instance, as the API returns it. The SDK maps transport failures and HTTP errors to the
 * provider errors the host acts on (429 → rate-limited with Retry-After, 401/403 → unauthorized,
 * 5xx → transient) and a body that is not JSON to transient. */
function fetchInstances() {
  const url = `${STATE.url}/instances`;
  const doc = http.get(url, { bearer: STATE.token, timeoutMs: TIMEOUT_MS }).errorForStatus().json();
  const instances = doc !== null && typeof doc === 'object' ? doc.instances : undefined;
  if (!Array.isArray(instances)
      || !instances.every((i) => i !== null && typeof i === 'object' && typeof i.name === 'string')) {
    // A cloud answering nonsense is failing, not empty: never "not found" here.
    throw new Transient(`unexpected answer from ${displayUrl(url)}: expected {"instances": [{"name": …}, …]}`);
  }
  return instances;
}

/** The instance ID in the node's provider ID; undefined when it has none yet (look it up by name
 * then). Another provider's ID is an error, never "not found": false from instanceExists makes
 * the host delete the Node. */
function instanceId(node) {
  if (!node.providerId) return undefined;
  const prefix = `${SCHEME}://`;
  const id = node.providerId.startsWith(prefix) ? node.providerId.slice(prefix.length) : '';
  if (!id) {
    throw new InvalidConfig(`node ${node.name} has provider ID ${JSON.stringify(node.providerId)}, which is not ${SCHEME}://<id>`);
  }
  return id;
}

/** The instance behind the node: by provider ID when it has one, else by name. undefined only
 * when the cloud answered and the instance is not there. */
function find(node) {
  const wanted = instanceId(node);
  return fetchInstances().find((i) => (wanted === undefined ? i.name === node.name : (i.id || i.name) === wanted));
}

function mustFind(node) {
  const i = find(node);
  if (i === undefined) throw new NotFound(`no instance for node ${node.name} in the inventory`);
  return i;
}

/** What instanceMetadata answers for the instance; an address of a type Kubernetes does not know
 * is permanent, since asking again brings the same answer. */
function metadata(i) {
  const addresses = (i.addresses ?? []).map((a) => {
    const kind = a !== null && typeof a === 'object' && Object.hasOwn(ADDRESS_TYPES, a.type) ? ADDRESS_TYPES[a.type] : undefined;
    if (kind === undefined || typeof a.address !== 'string') {
      throw new Permanent(`instance ${i.name} has an address the driver cannot read: ${JSON.stringify(a)}`);
    }
    return { kind, address: a.address };
  });
  return {
    providerId: `${SCHEME}://${i.id || i.name}`, instanceType: String(i.type ?? ''), zone: String(i.zone ?? ''),
    region: String(i.region ?? ''), addresses, additionalLabels: [],
  };
}

/** The instance as the listing shows it, or undefined when the driver cannot describe it: the
 * host then asks about its node on its own, and instanceMetadata answers with the error. */
function listed(i) {
  try {
    return { nodeName: i.name, metadata: metadata(i), shutdown: i.shutdown === true };
  } catch (e) {
    if (e instanceof Permanent) return undefined;
    throw e;
  }
}

export const provider = defineInterface('provider', {
  info: () => ({
    // The operator's --cloud-provider value.
    name: '{{name}}', version: '0.1.0', providerIdScheme: SCHEME,
    // Your API's address. The operator's --allow-egress replaces it (the conformance scenario
    // points the driver at a simulator that way).
    defaultEgress: ['https://api.example.com'],
    // Only environment variables with these prefixes reach init.
    envPrefixes: ['{{ENV}}_'],
    // Service annotation keys the driver may set or remove (its own domain).
    annotationPrefixes: ['{{name}}.example.com/'],
    // The credentials the driver reads. Declared, the host keeps them out of the guest (init
    // sees a placeholder; the host applies the value to requests), e.g.
    // secret.decl('api-token', [secret.env('{{ENV}}_API_TOKEN')],
    //   secret.origin([secret.env('{{ENV}}_API_URL')], 'https://api.example.com'), [secret.bearer()]).
    // Left empty, the driver receives its credentials in clear.
    secrets: [],
  }),
  init(ctx, config, env) {
    const value = (name) => env.find(([k]) => k === name)?.[1]?.trim() || undefined;
    const url = value('{{ENV}}_API_URL') ?? 'https://api.example.com';
    if (!url.startsWith('https://') && !url.startsWith('http://')) {
      throw new InvalidConfig(`{{ENV}}_API_URL ${JSON.stringify(url)} is not an http(s):// URL; set it to the API's address`);
    }
    const token = value('{{ENV}}_API_TOKEN');
    if (!token) throw new InvalidConfig('{{ENV}}_API_TOKEN is not set; put the API token in it');
    // Never let the token reach a log line.
    log.redact(token);
    STATE = { url: url.replace(/\/+$/, ''), token };
  },
  housekeeping() {},
});

// The variables init reads, by exact name (contract 0.2.1). Named here, init gets only these and
// the places of declared secrets: a credential the operator keeps under the prefix by another
// name never reaches the driver. Return undefined for every {{ENV}}_ variable.
export const environment = defineInterface('environment', {
  plainVariables: () => ['{{ENV}}_API_URL', '{{ENV}}_API_TOKEN'],
});

export const instances = defineInterface('instances', {
  instanceExists: (node) => find(node) !== undefined,
  instanceShutdown: (node) => mustFind(node).shutdown === true,
  instanceMetadata: (node) => metadata(mustFind(node)),
  // Every instance in one listing (contract 0.2.2), so the host asks the API once per pass
  // instead of once per node; each entry is what the three functions above answer, under the
  // name `find` matches a node without a provider ID by. This API answers in one response, so
  // the listing is one page; with an API that pages, return its cursor as `next` (the host passes
  // it back as `page`; at most 20,000 instances a page).
  listInstances(page) {
    if (page !== undefined) {
      throw new Permanent(`page token ${JSON.stringify(page)} is not one this driver wrote: its listing is one page`);
    }
    return { instances: fetchInstances().map(listed).filter((e) => e !== undefined), next: undefined };
  },
});

// Every world exports `instance-listing` (contract 0.2.2): the SDK's answers with
// `instances.listInstances` above.
export { instanceListing } from '../wasm-ccm/sdk/js/index.js';
