//! The registry client: the distribution API's manifest and blob endpoints, with Basic and
//! Bearer-token authentication, digest checks on everything read, and the cache.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use url::Url;

use crate::artifact::{
    ComponentInfo, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, MAX_MANIFEST_BYTES, Manifest, OCI_INDEX,
    OCI_MANIFEST, Packing, digest_of, pack, wasm_from_tar_gzip,
};
use crate::auth::{Challenge, DockerConfig, parse_challenge};
use crate::cache::BlobCache;
use crate::object::Object;
use crate::reference::{Reference, parse_digest};

/// How the client reaches registries.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Credentials per registry.
    pub credentials: DockerConfig,
    /// Registries (`host` or `host:port`) spoken to over plain HTTP although not on loopback.
    pub insecure_registries: Vec<String>,
    /// Deadline of each request.
    pub timeout: Duration,
    /// The largest component accepted.
    pub max_wasm_bytes: usize,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            credentials: DockerConfig::default(),
            insecure_registries: Vec::new(),
            timeout: Duration::from_secs(60),
            max_wasm_bytes: 64 << 20,
        }
    }
}

/// A registry client.
pub struct Client {
    http: reqwest::Client,
    options: ClientOptions,
    /// `Authorization` values per (registry, scope), reused until a 401.
    auth: Mutex<HashMap<(String, String), String>>,
}

/// What a pull produced.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The component.
    pub wasm: Vec<u8>,
    /// The reference pinned to the manifest's digest (`…@sha256:…`).
    pub pinned: Reference,
    /// The manifest's digest.
    pub manifest_digest: String,
    /// The media type of the layer the component came from.
    pub layer_media_type: String,
    /// Whether nothing was fetched: manifest and layer came from the cache.
    pub from_cache: bool,
}

/// What a push produced.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The reference pinned to the manifest's digest.
    pub pinned: Reference,
    /// The manifest's digest.
    pub manifest_digest: String,
    /// The layer's digest (the sha256 of the `.wasm`).
    pub layer_digest: String,
}

impl Client {
    /// A client with these options.
    pub fn new(options: ClientOptions) -> anyhow::Result<Client> {
        // Redirects (blob GETs go to object storage) may change host but never downgrade to
        // plain HTTP, except to hosts plain HTTP is allowed for.
        let insecure = options.insecure_registries.clone();
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            let downgrade = attempt.url().scheme() == "http"
                && !plain_http_allowed(&host_port(attempt.url()), &insecure);
            if downgrade {
                let refused = format!("refusing a redirect to plain HTTP ({})", attempt.url());
                attempt.error(refused)
            } else if attempt.previous().len() >= 10 {
                attempt.error("more than 10 redirects")
            } else {
                attempt.follow()
            }
        });
        // No deadline on a whole transfer (a large layer on a slow link is fine); a stalled
        // connection is cut by the read timeout.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(options.timeout)
            .redirect(redirects)
            .user_agent(concat!("wasm-ccm/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("cannot build the registry HTTP client")?;
        Ok(Client {
            http,
            options,
            auth: Mutex::new(HashMap::new()),
        })
    }

    /// Whether `registry` is spoken to over plain HTTP: on loopback, or named insecure.
    pub fn plain_http(&self, registry: &str) -> bool {
        plain_http_allowed(registry, &self.options.insecure_registries)
    }

    /// Refuses a plain-HTTP URL (a token realm, an upload location) unless its host may be
    /// spoken to in plain HTTP: a registry on TLS must not send credentials or data in clear.
    fn check_scheme(&self, reference: &Reference, url: &Url, what: &str) -> anyhow::Result<()> {
        if url.scheme() == "http" && !self.plain_http(&host_port(url)) {
            bail!(
                "registry {} sent {what} {url} over plain HTTP: refused (name its host with --insecure-registry if that is intended)",
                reference.registry
            );
        }
        Ok(())
    }

    pub(crate) fn endpoint(&self, reference: &Reference, tail: &str) -> anyhow::Result<Url> {
        let scheme = if self.plain_http(&reference.registry) {
            "http"
        } else {
            "https"
        };
        let host = match reference.registry.as_str() {
            "docker.io" => "registry-1.docker.io",
            other => other,
        };
        Url::parse(&format!(
            "{scheme}://{host}/v2/{}/{tail}",
            reference.repository
        ))
        .with_context(|| format!("{reference} does not make a valid registry URL"))
    }

    /// Sends a request to `url`, answering an authentication challenge once. The registry's
    /// credentials go only to the registry's own origin.
    pub(crate) async fn send(
        &self,
        reference: &Reference,
        scope: &str,
        url: &Url,
        build: impl Fn(&reqwest::Client) -> RequestBuilder,
    ) -> anyhow::Result<Response> {
        self.check_scheme(reference, url, "the address")?;
        let own_origin = self.endpoint(reference, "")?.origin() == url.origin();
        let key = (reference.registry.clone(), scope.to_string());
        let cached = self.auth.lock().expect("auth lock").get(&key).cloned();
        let mut request = build(&self.http);
        if let Some(header) = cached.as_ref().filter(|_| own_origin) {
            request = request.header(AUTHORIZATION, header);
        }
        let response = request
            .send()
            .await
            .map_err(|e| self.transport_error(reference, e))?;
        if response.status() != StatusCode::UNAUTHORIZED || !own_origin {
            return Ok(response);
        }
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_challenge)
            .ok_or_else(|| {
                anyhow!(
                    "registry {} answered 401 without a Basic or Bearer challenge",
                    reference.registry
                )
            })?;
        let header = self.authorize(reference, scope, challenge).await?;
        self.auth
            .lock()
            .expect("auth lock")
            .insert(key, header.clone());
        let response = build(&self.http)
            .header(AUTHORIZATION, header)
            .send()
            .await
            .map_err(|e| self.transport_error(reference, e))?;
        if response.status() == StatusCode::UNAUTHORIZED {
            bail!(
                "registry {} refused the credentials for {} (401); check the entry for {:?} in --registry-config",
                reference.registry,
                reference.repository,
                reference.registry
            );
        }
        Ok(response)
    }

    async fn authorize(
        &self,
        reference: &Reference,
        scope: &str,
        challenge: Challenge,
    ) -> anyhow::Result<String> {
        let creds = self.options.credentials.for_registry(&reference.registry);
        let missing = || match self.options.credentials.unusable(&reference.registry) {
            Some(why) => format!("--registry-config has no usable credentials for it: {why}"),
            None => format!(
                "pass --registry-config with a dockerconfigjson entry for {:?} (it has entries for {:?})",
                reference.registry,
                self.options.credentials.registries()
            ),
        };
        match challenge {
            Challenge::Basic => creds.map(|c| c.basic_header()).ok_or_else(|| {
                anyhow!(
                    "registry {} requires credentials; {}",
                    reference.registry,
                    missing()
                )
            }),
            Challenge::Bearer {
                realm,
                service,
                scope: _,
            } => {
                let mut url = Url::parse(&realm).with_context(|| {
                    format!(
                        "registry {} names a token realm that is not a URL: {realm:?}",
                        reference.registry
                    )
                })?;
                self.check_scheme(reference, &url, "its token service")?;
                {
                    let mut query = url.query_pairs_mut();
                    if let Some(service) = &service {
                        query.append_pair("service", service);
                    }
                    query.append_pair("scope", scope);
                }
                let mut request = self.http.get(url.clone());
                if let Some(c) = creds {
                    request = request.header(AUTHORIZATION, c.basic_header());
                }
                let response = request.send().await.with_context(|| {
                    format!(
                        "cannot reach the token service {realm} of {}",
                        reference.registry
                    )
                })?;
                if !response.status().is_success() {
                    bail!(
                        "the token service {realm} of {} refused {scope:?} ({}){}",
                        reference.registry,
                        response.status(),
                        if creds.is_none() {
                            format!("; the repository may need credentials: {}", missing())
                        } else {
                            "; check the credentials in --registry-config".to_string()
                        }
                    );
                }
                #[derive(serde::Deserialize)]
                struct Token {
                    token: Option<String>,
                    access_token: Option<String>,
                }
                let body = read_limited(response, 1 << 20, "the token").await?;
                let token: Token = serde_json::from_slice(&body).with_context(|| {
                    format!("the token service {realm} answered something that is not a token")
                })?;
                let token = token
                    .token
                    .or(token.access_token)
                    .filter(|t| !t.is_empty())
                    .ok_or_else(|| anyhow!("the token service {realm} answered no token"))?;
                Ok(format!("Bearer {token}"))
            }
        }
    }

    fn transport_error(&self, reference: &Reference, e: reqwest::Error) -> anyhow::Error {
        let hint = if self.plain_http(&reference.registry) {
            String::new()
        } else {
            "; a registry that speaks plain HTTP must be on loopback or named with --insecure-registry".to_string()
        };
        anyhow!(
            "cannot reach registry {}: {}{hint}",
            reference.registry,
            error_chain(&e)
        )
    }

    /// Pushes `wasm` to `reference` (which must have a tag) in the CNCF Wasm layout.
    pub async fn push(
        &self,
        reference: &Reference,
        wasm: &[u8],
        component: ComponentInfo,
        annotations: BTreeMap<String, String>,
    ) -> anyhow::Result<Pushed> {
        if reference.tag.is_none() {
            bail!("push needs a tag: {reference} names none (e.g. oci://REGISTRY/REPO:0.1.0)");
        }
        if reference.digest.is_some() {
            bail!("push takes a tag, not a digest: the digest is what the push computes");
        }
        let created = std::env::var("SOURCE_DATE_EPOCH")
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(rfc3339);
        let packed = pack(wasm, component, created, annotations);
        let manifest_digest = self
            .push_manifest(
                reference,
                OCI_MANIFEST,
                &packed.manifest,
                &[packed.config.as_slice(), wasm],
            )
            .await?;
        Ok(Pushed {
            pinned: reference.pinned(&manifest_digest),
            manifest_digest,
            layer_digest: packed.layer_digest,
        })
    }

    /// Uploads `blobs` (skipping those the registry has) and then `manifest` under the
    /// reference's tag (or digest). Returns the manifest's digest. [`Client::push`] uses it; so
    /// can tools publishing other layouts.
    pub async fn push_manifest(
        &self,
        reference: &Reference,
        media_type: &str,
        manifest: &[u8],
        blobs: &[&[u8]],
    ) -> anyhow::Result<String> {
        let scope = format!("repository:{}:pull,push", reference.repository);
        for blob in blobs {
            self.upload_blob(reference, &scope, &digest_of(blob), blob.to_vec())
                .await?;
        }
        let manifest_digest = digest_of(manifest);
        let url = self.endpoint(
            reference,
            &format!("manifests/{}", reference.manifest_ref()),
        )?;
        let response = self
            .send(reference, &scope, &url, |http| {
                http.put(url.clone())
                    .header(CONTENT_TYPE, media_type)
                    .body(manifest.to_vec())
            })
            .await?;
        if response.status() != StatusCode::CREATED {
            return Err(
                registry_error(response, &format!("storing the manifest of {reference}")).await,
            );
        }
        if let Some(said) = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            && said != manifest_digest
        {
            bail!(
                "registry {} stored the manifest as {said}, not {manifest_digest}: it rewrote the manifest",
                reference.registry
            );
        }
        Ok(manifest_digest)
    }

    async fn upload_blob(
        &self,
        reference: &Reference,
        scope: &str,
        digest: &str,
        bytes: Vec<u8>,
    ) -> anyhow::Result<()> {
        let blob_url = self.endpoint(reference, &format!("blobs/{digest}"))?;
        let head = self
            .send(reference, scope, &blob_url, |http| {
                http.head(blob_url.clone())
            })
            .await?;
        if head.status() == StatusCode::OK {
            return Ok(());
        }
        let uploads = self.endpoint(reference, "blobs/uploads/")?;
        let started = self
            .send(reference, scope, &uploads, |http| {
                // An explicit empty body sends `Content-Length: 0`, which some front ends want.
                http.post(uploads.clone()).body(Vec::new())
            })
            .await?;
        if started.status() != StatusCode::ACCEPTED {
            return Err(registry_error(started, &format!("starting the upload of {digest}")).await);
        }
        let location = started
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                anyhow!(
                    "registry {} started an upload but gave no Location",
                    reference.registry
                )
            })?;
        let mut put_url = uploads.join(location).with_context(|| {
            format!(
                "registry {} gave a bad upload Location {location:?}",
                reference.registry
            )
        })?;
        put_url.query_pairs_mut().append_pair("digest", digest);
        let done = self
            .send(reference, scope, &put_url, |http| {
                http.put(put_url.clone())
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(bytes.clone())
            })
            .await?;
        if done.status() != StatusCode::CREATED {
            return Err(registry_error(done, &format!("uploading {digest}")).await);
        }
        Ok(())
    }

    /// Pulls the component `reference` names. With a digest and a cache holding it, nothing is
    /// fetched; a tag is always resolved against the registry (tags move). Every manifest and
    /// blob read is checked against its descriptor's size and digest (`fetch.rs`).
    pub async fn pull(
        &self,
        reference: &Reference,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<Pulled> {
        self.pull_with_manifest(reference, cache, None).await
    }

    /// [`Client::pull`], with the manifest's bytes when the caller already fetched them (for
    /// the digest `reference` is pinned to; they are checked against it).
    pub(crate) async fn pull_with_manifest(
        &self,
        reference: &Reference,
        cache: Option<&BlobCache>,
        fetched: Option<Vec<u8>>,
    ) -> anyhow::Result<Pulled> {
        let fetched =
            fetched.filter(|b| reference.digest.as_deref() == Some(digest_of(b).as_str()));
        // Bytes the caller fetched (resolving a tag) were fetched, not cached.
        let (mut manifest_bytes, manifest_digest, mut from_cache) = match fetched {
            Some(bytes) => {
                let digest = digest_of(&bytes);
                (bytes, digest, false)
            }
            None => self.fetch_reference(reference, cache).await?,
        };
        let mut manifest = parse_manifest(&manifest_bytes, reference)?;
        if manifest.is_index() {
            let entry = manifest
                .wasm_entry()
                .map_err(|e| anyhow!("{reference}: {e}"))?
                .clone();
            let platform = self
                .fetch(reference, Object::PlatformManifest, &entry, cache)
                .await?;
            from_cache &= platform.from_cache;
            manifest_bytes = platform.bytes;
            manifest = parse_manifest(&manifest_bytes, reference)?;
        }
        let (layer, packing) = manifest
            .wasm_layer()
            .map_err(|e| anyhow!("{reference}: {e}"))?;
        let blob = self
            .fetch(reference, Object::WasmLayer, layer, cache)
            .await?;
        from_cache &= blob.from_cache;
        let wasm = match packing {
            Packing::Raw => blob.bytes,
            Packing::TarGzip => wasm_from_tar_gzip(&blob.bytes, self.options.max_wasm_bytes)
                .map_err(|e| anyhow!("{reference}: {e}"))?,
        };
        Ok(Pulled {
            wasm,
            pinned: reference.pinned(&manifest_digest),
            manifest_digest,
            layer_media_type: layer.media_type.clone(),
            from_cache,
        })
    }

    /// The manifest `reference` names, its digest, and whether it came from the cache: by
    /// digest through `Client::fetch_pinned` (cache first, digest checked); by tag from the
    /// registry (a tag names no content to check against: its digest is what it resolves to).
    pub(crate) async fn fetch_reference(
        &self,
        reference: &Reference,
        cache: Option<&BlobCache>,
    ) -> anyhow::Result<(Vec<u8>, String, bool)> {
        if let Some(digest) = &reference.digest {
            let fetched = self.fetch_pinned(reference, digest, cache).await?;
            return Ok((fetched.bytes, digest.clone(), fetched.from_cache));
        }
        let bytes = self.fetch_tag(reference).await?;
        let digest = digest_of(&bytes);
        if let Some(c) = cache {
            c.put(&digest, &bytes);
        }
        Ok((bytes, digest, false))
    }

    /// The manifest the tag of `reference` names now.
    async fn fetch_tag(&self, reference: &Reference) -> anyhow::Result<Vec<u8>> {
        let url = self.endpoint(
            reference,
            &format!("manifests/{}", reference.manifest_ref()),
        )?;
        let accept = [
            OCI_MANIFEST,
            DOCKER_MANIFEST,
            OCI_INDEX,
            DOCKER_MANIFEST_LIST,
        ]
        .join(", ");
        let scope = format!("repository:{}:pull", reference.repository);
        let response = self
            .send(reference, &scope, &url, |http| {
                http.request(Method::GET, url.clone())
                    .header(ACCEPT, accept.clone())
            })
            .await?;
        if !response.status().is_success() {
            return Err(
                registry_error(response, &format!("reading the manifest of {reference}")).await,
            );
        }
        read_limited(response, MAX_MANIFEST_BYTES, "the manifest")
            .await
            .map_err(|e| anyhow!("{reference}: {e}"))
    }

    /// The largest component accepted.
    pub(crate) fn max_wasm_bytes(&self) -> usize {
        self.options.max_wasm_bytes
    }
}

fn parse_manifest(bytes: &[u8], reference: &Reference) -> anyhow::Result<Manifest> {
    let manifest: Manifest = serde_json::from_slice(bytes).with_context(|| {
        format!("{reference}: the manifest is not valid JSON of an OCI manifest")
    })?;
    if manifest.schema_version != 2 {
        bail!(
            "{reference}: manifest schemaVersion {} is not supported (only 2)",
            manifest.schema_version
        );
    }
    // Every digest is checked before it is used in a URL or a cache path.
    for descriptor in manifest
        .config
        .iter()
        .chain(&manifest.layers)
        .chain(&manifest.manifests)
    {
        parse_digest(&descriptor.digest)
            .map_err(|e| anyhow!("{reference}: the manifest is refused: {e}"))?;
    }
    Ok(manifest)
}

pub(crate) async fn read_limited(
    mut response: Response,
    limit: usize,
    what: &str,
) -> anyhow::Result<Vec<u8>> {
    if let Some(len) = response.content_length()
        && len > limit as u64
    {
        bail!("{what} is {len} bytes, over the limit of {limit}");
    }
    let mut out = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .with_context(|| format!("reading {what} was cut off"))?
    {
        if out.len() + chunk.len() > limit {
            bail!("{what} is over the limit of {limit} bytes");
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The registry's error, with the codes and messages of its `{"errors": […]}` body.
pub(crate) async fn registry_error(response: Response, doing: &str) -> anyhow::Error {
    let status = response.status();
    let body = read_limited(response, 64 << 10, "the error body")
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    #[derive(serde::Deserialize)]
    struct Errors {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        code: String,
        #[serde(default)]
        message: String,
    }
    let detail = match serde_json::from_str::<Errors>(&body) {
        Ok(e) if !e.errors.is_empty() => e
            .errors
            .iter()
            .map(|e| format!("{}: {}", e.code, e.message))
            .collect::<Vec<_>>()
            .join("; "),
        _ => body,
    };
    // The registry chose this text: one line, bounded, however many errors it listed.
    let detail = crate::refusal::clip(&detail, 300);
    let hint = match status {
        StatusCode::NOT_FOUND => " (check the repository, tag and digest)",
        StatusCode::FORBIDDEN => " (the credentials lack access to this repository)",
        _ => "",
    };
    anyhow!("{doing} failed: {status} {detail}{hint}")
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// `host[:port]` of a URL, as registries are named.
fn host_port(url: &Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        _ => String::new(),
    }
}

/// Plain HTTP is allowed for loopback hosts and those named insecure.
fn plain_http_allowed(registry: &str, insecure: &[String]) -> bool {
    is_loopback(registry)
        || insecure
            .iter()
            .any(|r| r == registry || r == host_of(registry))
}

/// `host` of `host[:port]` or `[v6]:port`.
fn host_of(registry: &str) -> &str {
    if let Some(rest) = registry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    registry.split(':').next().unwrap_or(registry)
}

fn is_loopback(registry: &str) -> bool {
    let host = host_of(registry);
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// RFC 3339 UTC of a Unix time (for `created`, from `SOURCE_DATE_EPOCH`).
fn rfc3339(secs: i64) -> Option<String> {
    jiff::Timestamp::from_second(secs)
        .ok()
        .map(|t| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_and_named_registries_get_plain_http() {
        let client = Client::new(ClientOptions {
            insecure_registries: vec!["registry.lan:5000".into(), "other.lan".into()],
            ..Default::default()
        })
        .unwrap();
        for plain in [
            "127.0.0.1:5000",
            "localhost",
            "[::1]:5000",
            "registry.lan:5000",
            "other.lan:443",
        ] {
            assert!(client.plain_http(plain), "{plain}");
        }
        for tls in [
            "ghcr.io",
            "registry.lan",
            "10.0.0.1:5000",
            "localhost.example.com",
        ] {
            assert!(!client.plain_http(tls), "{tls}");
        }
    }

    #[test]
    fn manifests_with_digests_that_could_become_paths_are_refused() {
        let reference = Reference::parse("oci://r.example/a:1").unwrap();
        let good = format!("sha256:{}", "a".repeat(64));
        for bad in ["sha256:../../etc/passwd", "sha256:/etc/passwd", "md5:abc"] {
            let manifest = serde_json::json!({
                "schemaVersion": 2,
                "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": good, "size": 2},
                "layers": [{"mediaType": "application/wasm", "digest": bad, "size": 8}],
            });
            let err = parse_manifest(manifest.to_string().as_bytes(), &reference).unwrap_err();
            assert!(
                format!("{err:#}").contains("the manifest is refused"),
                "{err:#}"
            );
        }
    }

    #[test]
    fn source_date_epoch_formats_as_rfc3339() {
        assert_eq!(rfc3339(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(
            rfc3339(951_782_400).as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
    }
}
