//! The CloudStack API over the host's `http` import: signed requests (GET for reads, form POST
//! for changes), response envelopes and error codes, pagination, and asynchronous jobs waited
//! for within a per-call budget.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use wasm_ccm_sdk::http::{self, Response};
use wasm_ccm_sdk::log;
use wasm_ccm_sdk::types::ProviderError;

use crate::config::Config;
use crate::model::Project;
use crate::sign;

/// One request may take this long; well inside the host's call deadline.
const TIMEOUT_MS: u32 = 15_000;
/// A list longer than this many pages is treated as a server that ignores `page`.
const MAX_PAGES: usize = 200;
/// Reads of a list whose `count` changed between pages, before giving up for this call.
const LIST_ATTEMPTS: usize = 3;
/// How long a caller waits before calling again when a job outlived the call's budget.
pub const JOB_RETRY_SECS: u32 = 5;
/// The first pause between two polls of a job; doubled up to [`MAX_POLL_INTERVAL`].
const FIRST_POLL_INTERVAL: Duration = Duration::from_millis(100);
const MAX_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Request parameters, in the order they are added; signing sorts them.
#[derive(Clone, Debug, Default)]
pub struct Params(Vec<(String, String)>);

impl Params {
    /// No parameters.
    pub fn new() -> Self {
        Params::default()
    }

    /// Adds `name=value`.
    pub fn set(mut self, name: &str, value: impl Into<String>) -> Self {
        self.0.push((name.to_string(), value.into()));
        self
    }

    /// Adds `name=value` when there is a value.
    pub fn opt(self, name: &str, value: Option<&str>) -> Self {
        match value {
            Some(v) => self.set(name, v),
            None => self,
        }
    }
}

/// Where a later page of a list starts, for [`Api::list_one_page`]: `page` (2 or more) at `size`
/// items a page (the first page's length, so never above the server's `default.page.size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageAt {
    /// CloudStack's `page`, counted from 1.
    pub page: usize,
    /// CloudStack's `pagesize`.
    pub size: usize,
}

impl PageAt {
    /// The page token handed to the host: `<page>/<pagesize>`.
    pub fn token(self) -> String {
        format!("{}/{}", self.page, self.size)
    }

    /// Where the page after the one at `at` (`None`: the first) starts, given that it held `got`
    /// items and CloudStack's `count` was `count`: nowhere after an empty or short page or once
    /// the pages so far hold `count` items; else the next page at the first page's length.
    pub fn after(at: Option<PageAt>, got: usize, count: usize) -> Option<PageAt> {
        match at {
            None if got > 0 && got < count => Some(PageAt { page: 2, size: got }),
            Some(at) if got >= at.size && at.page.saturating_mul(at.size) < count => Some(PageAt {
                page: at.page + 1,
                size: at.size,
            }),
            _ => None,
        }
    }

    /// Reads a token [`PageAt::token`] made; `None` for anything else (a token this driver could
    /// not have issued: a first page, a size CloudStack's `int` cannot hold, signs, spaces).
    pub fn parse(token: &str) -> Option<PageAt> {
        let (page, size) = token.split_once('/')?;
        let number = |s: &str| {
            s.bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| s.parse::<usize>().ok())
                .flatten()
        };
        let (page, size) = (number(page)?, number(size)?);
        // `pagesize` is a Java `Integer` in CloudStack (`BaseListCmd`).
        let fits = |n: usize| i32::try_from(n).is_ok();
        (page >= 2 && size >= 1 && fits(page) && fits(size)).then_some(PageAt { page, size })
    }
}

/// A job CloudStack accepted: its id and, for creations, the new object's id.
#[derive(Clone, Debug)]
pub struct Job {
    /// The job's id, polled with `queryAsyncJobResult`.
    pub jobid: String,
    /// The command that started it, e.g. `createLoadBalancerRule` (for messages).
    pub command: &'static str,
    /// The id of the object the job creates, known before the job ends.
    pub entity: Option<String>,
}

/// How long the current call may still wait for jobs, and whose work it is (a Service's UID):
/// jobs that outlive the budget are remembered under that owner and waited for first on its
/// next call, so no work is started twice.
pub struct Budget {
    deadline: Instant,
    owner: String,
}

impl Budget {
    /// A budget of `length` from now for `owner`'s work.
    pub fn new(length: Duration, owner: &str) -> Self {
        Budget {
            deadline: Instant::now() + length,
            owner: owner.to_string(),
        }
    }

    fn left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// A job that outlived its call.
#[derive(Clone, Debug)]
struct PendingJob {
    owner: String,
    job: Job,
}

/// The API client. The project id and the pending jobs are caches: an instance that loses them
/// looks the project up again and finds the jobs' effects in CloudStack's state.
pub struct Api {
    url: String,
    api_key: String,
    project: Option<String>,
    project_id: RefCell<Option<String>>,
    pending: RefCell<Vec<PendingJob>>,
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Whether `s` is a UUID (`8-4-4-4-12` hex digits).
pub fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl Api {
    /// A client for the configured endpoint and keys.
    pub fn new(config: &Config) -> Self {
        Api {
            url: config.api_url.clone(),
            api_key: config.api_key.clone(),
            project: config.project.clone(),
            project_id: RefCell::new(None),
            pending: RefCell::new(Vec::new()),
        }
    }

    /// The configured project's UUID, `None` without a project. A name is looked up once with
    /// `listProjects` (upstream does the same).
    pub fn project_id(&self) -> Result<Option<String>, ProviderError> {
        let Some(project) = self.project.as_deref() else {
            return Ok(None);
        };
        if is_uuid(project) {
            return Ok(Some(project.to_string()));
        }
        if let Some(id) = self.project_id.borrow().clone() {
            return Ok(Some(id));
        }
        let found: Vec<Project> = self.list(
            "listProjects",
            Params::new().set("name", project).set("listall", "true"),
            "project",
        )?;
        let id = found
            .into_iter()
            .find(|p| p.name.eq_ignore_ascii_case(project))
            .map(|p| p.id)
            .ok_or_else(|| {
                ProviderError::InvalidConfig(format!(
                    "project-id {project:?}: no project of that name is visible to this API key; give the project's UUID or name"
                ))
            })?;
        *self.project_id.borrow_mut() = Some(id.clone());
        Ok(Some(id))
    }

    /// `params` plus `projectid` when a project is configured.
    pub fn scoped(&self, params: Params) -> Result<Params, ProviderError> {
        Ok(params.opt("projectid", self.project_id()?.as_deref()))
    }

    /// Sends one command (the host signs it) and returns the body of its `<command>response` envelope.
    fn call(&self, command: &str, params: Params, change: bool) -> Result<Value, ProviderError> {
        let mut all = params.0;
        all.extend(
            [
                ("command", command.to_string()),
                ("apiKey", self.api_key.clone()),
                ("response", "json".to_string()),
                ("signatureversion", "3".to_string()),
                (
                    "expires",
                    sign::cs_date(now_secs() + sign::EXPIRES_AFTER_SECS),
                ),
            ]
            .map(|(k, v)| (k.to_string(), v)),
        );
        // The host signs: `secret-key` is declared as the key of its CloudStack signature,
        // so the driver holds only a placeholder for it and sends the request unsigned.
        let signed = sign::canonical_query(&all);
        let request = if change {
            http::post(&self.url)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(signed)
        } else {
            http::get(format!("{}?{signed}", self.url))
        };
        let response = request
            .header("accept", "application/json")
            .timeout_ms(TIMEOUT_MS)
            .send()?;
        unwrap_envelope(command, &response)
    }

    /// A read that returns one object, e.g. `listCapabilities`.
    pub fn read(&self, command: &str, params: Params) -> Result<Value, ProviderError> {
        self.call(command, params, false)
    }

    /// Every item of a list command, within CloudStack's paging rule
    /// (`BaseListCmd.validateSpecificParameters`: `page` without `pagesize` is refused with 431
    /// "\"pagesize\" parameter is required when \"page\" is specified", and `pagesize` without
    /// `page` likewise; `getPageSize` refuses a `pagesize` above the server's
    /// `default.page.size`, which each cloud sets and no API reports).
    ///
    /// The first request names neither (what upstream sends: the first page at the server's
    /// own size, valid on every server, an unlimited size included). Only when it came back
    /// short of `count` are `page=2, 3, …` asked, each with `pagesize` = the first page's length:
    /// the server's own size, so never above its maximum, and the same offsets as the first
    /// page. It stops at a short page or once `count` items arrived. A `count` that changes
    /// between pages means the set changed while it was read (items could be skipped or seen
    /// twice): the list is read again from the start, a few times at most.
    pub fn list<T: DeserializeOwned>(
        &self,
        command: &str,
        params: Params,
        key: &str,
    ) -> Result<Vec<T>, ProviderError> {
        for _ in 0..LIST_ATTEMPTS {
            if let Some(items) = self.list_once(command, &params, key)? {
                return Ok(items);
            }
        }
        Err(ProviderError::Transient(format!(
            "{command}: CloudStack's answer kept changing while it was read page by page ({LIST_ATTEMPTS} attempts); the next call reads it again"
        )))
    }

    /// One pass of [`Api::list`]; `None` when `count` changed between pages.
    ///
    /// Items are kept once by `id`: offsets that shift between pages can return an item twice,
    /// and a VM seen twice would look like two VMs of one name (an ambiguous node). A later page
    /// of only items already seen means the set shifted under the offsets, so what it pushed
    /// out of view is unknown: an error, never a short list taken for the whole one.
    fn list_once<T: DeserializeOwned>(
        &self,
        command: &str,
        params: &Params,
        key: &str,
    ) -> Result<Option<Vec<T>>, ProviderError> {
        let (count, first) = self.list_page(command, params.clone(), key)?;
        let size = first.len();
        let mut items = Vec::new();
        let mut seen = BTreeSet::new();
        merge_page(&mut items, &mut seen, first);
        if size == 0 || size >= count {
            return typed(command, key, items).map(Some);
        }
        for page in 2..=MAX_PAGES {
            let (now, batch) = self.list_page(
                command,
                params
                    .clone()
                    .set("page", page.to_string())
                    .set("pagesize", size.to_string()),
                key,
            )?;
            if now != count {
                log::info(
                    "a CloudStack list changed while it was read; reading it again",
                    &[("command", command)],
                );
                return Ok(None);
            }
            // A short page is the last one.
            let last = batch.len() < size;
            if !batch.is_empty() && merge_page(&mut items, &mut seen, batch) == 0 {
                return Err(ProviderError::Transient(format!(
                    "{command}: page {page} from CloudStack held only items of earlier pages, so the list changed while it was read page by page and items may be missing; the next call reads it again"
                )));
            }
            if last || items.len() >= count {
                return typed(command, key, items).map(Some);
            }
        }
        Err(endless_pages(command, size))
    }

    /// One page of a list command for a caller that reads one page per call (the instance
    /// listing), by the same paging rule as [`Api::list`]: the first page (`at` `None`) names
    /// neither `page` nor `pagesize`, so it comes at the server's own `default.page.size`, valid
    /// on every server; the later ones ask `page=2, 3, …` with `pagesize` = the first page's
    /// length. Returns the items (each `id` once) and where the next page starts: `None` after a
    /// short or empty page, or once the pages so far hold `count` items.
    ///
    /// Unlike [`Api::list`], nothing is kept between pages, so a set that changes between two
    /// calls can show an item twice or not at all; the caller's reader must take neither as an
    /// answer (the host does: an instance listed twice or not at all is asked about by itself).
    pub fn list_one_page<T: DeserializeOwned>(
        &self,
        command: &str,
        params: Params,
        key: &str,
        at: Option<PageAt>,
    ) -> Result<(Vec<T>, Option<PageAt>), ProviderError> {
        let params = match at {
            None => params,
            Some(at) if at.page > MAX_PAGES => return Err(endless_pages(command, at.size)),
            Some(at) => params
                .set("page", at.page.to_string())
                .set("pagesize", at.size.to_string()),
        };
        let (count, batch) = self.list_page(command, params, key)?;
        let next = PageAt::after(at, batch.len(), count);
        let mut items = Vec::new();
        merge_page(&mut items, &mut BTreeSet::new(), batch);
        Ok((typed(command, key, items)?, next))
    }

    /// One page of a list: `count` (0 when absent) and the items under `key`, as JSON.
    fn list_page(
        &self,
        command: &str,
        params: Params,
        key: &str,
    ) -> Result<(usize, Vec<Value>), ProviderError> {
        let body = self.call(command, params, false)?;
        let count = body.get("count").and_then(Value::as_u64).unwrap_or(0);
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let batch = match body.get(key) {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list.clone(),
            Some(other) => {
                return Err(ProviderError::Transient(format!(
                    "unexpected {command} response from CloudStack: {key} is not a list but {other}; the next call asks again"
                )));
            }
        };
        Ok((count, batch))
    }

    /// Starts an asynchronous command; the job is waited for with [`Api::wait`].
    pub fn submit(&self, command: &'static str, params: Params) -> Result<Job, ProviderError> {
        let body = self.call(command, params, true)?;
        let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
        let jobid = text("jobid").ok_or_else(|| {
            ProviderError::Transient(format!(
                "unexpected {command} response from CloudStack: no jobid in {body}"
            ))
        })?;
        Ok(Job {
            jobid,
            command,
            entity: text("id"),
        })
    }

    /// Starts a command and waits for its job; returns the job's result.
    pub fn run(
        &self,
        command: &'static str,
        params: Params,
        budget: &Budget,
    ) -> Result<Value, ProviderError> {
        let job = self.submit(command, params)?;
        self.wait(&job, budget)
    }

    /// The job's result once it succeeded, its error once it failed, `None` while it runs.
    fn poll(&self, job: &Job) -> Result<Option<Value>, Polled> {
        let body = self
            .call(
                "queryAsyncJobResult",
                Params::new().set("jobid", &job.jobid),
                false,
            )
            .map_err(Polled::Unknown)?;
        let status = body.get("jobstatus").and_then(Value::as_i64).unwrap_or(0);
        let result = body.get("jobresult").cloned().unwrap_or(Value::Null);
        match status {
            0 => Ok(None),
            1 => Ok(Some(result)),
            _ => {
                let code = result
                    .get("errorcode")
                    .and_then(Value::as_u64)
                    .unwrap_or(530);
                let text = result
                    .get("errortext")
                    .and_then(Value::as_str)
                    .unwrap_or("no error text");
                Err(Polled::Failed(code_error(
                    code as u16,
                    &format!(
                        "CloudStack job {} ({}) failed: {text}",
                        job.jobid, job.command
                    ),
                )))
            }
        }
    }

    /// Waits for `job` within the budget. A job still running when the budget is spent is
    /// remembered for the budget's owner and reported as `retry-after`.
    pub fn wait(&self, job: &Job, budget: &Budget) -> Result<Value, ProviderError> {
        let mut pause = FIRST_POLL_INTERVAL;
        let remember = || {
            self.pending.borrow_mut().push(PendingJob {
                owner: budget.owner.clone(),
                job: job.clone(),
            })
        };
        loop {
            match self.poll(job) {
                Ok(Some(result)) => return Ok(result),
                Ok(None) => {}
                // The job failed: it is over.
                Err(Polled::Failed(e)) => return Err(e),
                // The poll itself failed (a 5xx, a timeout): the job may still run or have
                // succeeded. Remembered like a job outliving the budget, never taken for a
                // failure (that would undo work CloudStack still does).
                Err(Polled::Unknown(e)) => {
                    remember();
                    return Err(e);
                }
            }
            let left = budget.left();
            if left.is_zero() {
                remember();
                return Err(still_running(job));
            }
            // A pause between polls, never past the budget: the guest has no other work.
            std::thread::sleep(pause.min(left));
            pause = (pause * 2).min(MAX_POLL_INTERVAL);
        }
    }

    /// Waits for the jobs an earlier call of the same owner left running. A failed one is
    /// logged, forgotten (the caller looks at CloudStack's state anyway) and returned, for the
    /// caller to undo what it did around it.
    pub fn finish_pending(&self, budget: &Budget) -> Result<Vec<Job>, ProviderError> {
        let mut failed = Vec::new();
        let mine: Vec<PendingJob> = {
            let mut pending = self.pending.borrow_mut();
            let (mine, others) = pending.drain(..).partition(|p| p.owner == budget.owner);
            *pending = others;
            mine
        };
        for (i, p) in mine.iter().enumerate() {
            match self.wait(&p.job, budget) {
                Ok(_) => {}
                Err(e) if self.is_pending(&p.job) => {
                    // Still running, or its state unknown (the poll failed): `wait`
                    // re-remembered this job; keep the ones not yet looked at too.
                    self.pending
                        .borrow_mut()
                        .extend(mine[i + 1..].iter().cloned());
                    return Err(e);
                }
                Err(e) => {
                    log::warn(
                        "an earlier CloudStack job failed",
                        &[
                            ("job", &p.job.jobid),
                            ("command", p.job.command),
                            ("error", &e.to_string()),
                        ],
                    );
                    failed.push(p.job.clone());
                }
            }
        }
        Ok(failed)
    }

    /// Whether `job` is remembered as pending: it outlived its call, or its outcome could not
    /// be read. Not pending after an error means the job itself failed.
    pub fn is_pending(&self, job: &Job) -> bool {
        self.pending
            .borrow()
            .iter()
            .any(|p| p.job.jobid == job.jobid)
    }

    /// Forgets the owner's pending jobs (its object is gone).
    pub fn forget(&self, owner: &str) {
        self.pending.borrow_mut().retain(|p| p.owner != owner);
    }
}

/// Why a poll gave no result.
enum Polled {
    /// The job failed (`jobstatus` 2).
    Failed(ProviderError),
    /// `queryAsyncJobResult` itself failed: the job's outcome is unknown.
    Unknown(ProviderError),
}

/// The `retry-after` for a job still running.
fn still_running(job: &Job) -> ProviderError {
    ProviderError::retry_after(
        JOB_RETRY_SECS,
        format!(
            "CloudStack job {} ({}) is still running; the next call picks it up",
            job.jobid, job.command
        ),
    )
}

/// The body of `{"<command>response": {...}}`, or the error the envelope reports.
fn unwrap_envelope(command: &str, response: &Response) -> Result<Value, ProviderError> {
    let parsed: Option<Map<String, Value>> = serde_json::from_slice(&response.body).ok();
    let inner = parsed.as_ref().and_then(|m| m.values().next()).cloned();
    if response.status == 200 {
        return match inner {
            Some(v @ Value::Object(_)) => Ok(v),
            _ => Err(ProviderError::Transient(format!(
                "unexpected {command} response from {}: not a CloudStack JSON envelope: {}",
                http::display_url(&response.url),
                http::body_snippet(&response.body)
            ))),
        };
    }
    if response.status == 429 {
        return Err(ProviderError::RateLimited(
            response
                .header("retry-after")
                .and_then(|v| v.trim().parse().ok()),
        ));
    }
    let text = inner
        .as_ref()
        .and_then(|v| v.get("errortext"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| http::body_snippet(&response.body));
    let code = inner
        .as_ref()
        .and_then(|v| v.get("errorcode"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(response.status);
    Err(code_error(
        code,
        &format!(
            "CloudStack answered {command} with error {code} ({}): {text}",
            http::display_url(&response.url)
        ),
    ))
}

/// The provider error a CloudStack error code means.
fn code_error(code: u16, message: &str) -> ProviderError {
    match code {
        401 | 403 => ProviderError::Unauthorized(format!(
            "{message}; check api-key and secret-key in cloud-config, and the host's clock (signed requests carry an expiry time)"
        )),
        // Only an unknown `id` means the object is gone; CloudStack words an unknown
        // `projectid` the same way, and that is the operator's to fix, never a deleted node.
        431 if message.contains("Invalid parameter projectid") => {
            ProviderError::InvalidConfig(format!(
                "{message}; check project-id in cloud-config (a project UUID or name visible to this API key)"
            ))
        }
        431 if message.contains("Invalid parameter id value=")
            && message.contains("entity does not exist") =>
        {
            ProviderError::NotFound(message.into())
        }
        432 => ProviderError::Permanent(format!(
            "{message}; the API key's account may not call it (an admin-only API, or a role without it)"
        )),
        429 => ProviderError::RateLimited(None),
        537 => ProviderError::Permanent(format!(
            "{message}; another rule already uses this port on the IP address"
        )),
        531 | 532 => ProviderError::Permanent(format!(
            "{message}; the account is refused or at a resource limit (e.g. public IPs): raise the limit or free resources"
        )),
        500..=599 => ProviderError::Transient(message.into()),
        _ => ProviderError::Permanent(message.into()),
    }
}

/// Appends the items of `batch` whose `id` is not in `seen` yet (an item without a string `id`
/// cannot be told apart and is always kept); returns how many were appended.
fn merge_page(items: &mut Vec<Value>, seen: &mut BTreeSet<String>, batch: Vec<Value>) -> usize {
    let before = items.len();
    for item in batch {
        match item.get("id").and_then(Value::as_str) {
            Some(id) if !seen.insert(id.to_string()) => {}
            _ => items.push(item),
        }
    }
    items.len() - before
}

/// A list that kept returning full pages past [`MAX_PAGES`].
fn endless_pages(command: &str, size: usize) -> ProviderError {
    ProviderError::Transient(format!(
        "{command}: CloudStack kept returning full pages of {size} after {MAX_PAGES} pages; is `page` ignored by a proxy?"
    ))
}

/// The items of a list as `T`.
fn typed<T: DeserializeOwned>(
    command: &str,
    key: &str,
    items: Vec<Value>,
) -> Result<Vec<T>, ProviderError> {
    serde_json::from_value::<Vec<T>>(Value::Array(items)).map_err(|e| {
        ProviderError::Transient(format!(
            "unexpected {command} response from CloudStack: {key} is not a list of {key} objects: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16, body: &str) -> Response {
        Response {
            url: "https://cloud.example/client/api?apiKey=secret".into(),
            status,
            headers: vec![],
            body: body.as_bytes().to_vec(),
        }
    }

    #[test]
    fn page_tokens_round_trip_and_refuse_the_rest() {
        let at = PageAt { page: 3, size: 500 };
        assert_eq!(at.token(), "3/500");
        assert_eq!(PageAt::parse("3/500"), Some(at));
        for bad in [
            "",
            "1/500",
            "0/500",
            "2/0",
            "2/",
            "/500",
            "2/500/1",
            "+2/500",
            "2/ 500",
            "2/-1",
            "2/2147483648",
            "x/500",
        ] {
            assert_eq!(PageAt::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn next_pages_follow_full_pages_up_to_count() {
        let at = |page, size| Some(PageAt { page, size });
        // The first page at the server's own size: more follow when it is short of `count`.
        assert_eq!(PageAt::after(None, 500, 1_200), at(2, 500));
        assert_eq!(PageAt::after(None, 500, 500), None);
        assert_eq!(PageAt::after(None, 0, 0), None);
        // No `count` (0): the first page is taken as the whole list.
        assert_eq!(PageAt::after(None, 3, 0), None);
        // Later pages: full and short of `count` go on; a short one or reaching `count` ends.
        assert_eq!(PageAt::after(at(2, 500), 500, 1_200), at(3, 500));
        assert_eq!(PageAt::after(at(3, 500), 200, 1_200), None);
        assert_eq!(PageAt::after(at(2, 500), 500, 1_000), None);
        assert_eq!(PageAt::after(at(2, 500), 0, 1_200), None);
    }

    #[test]
    fn envelopes() {
        let ok = unwrap_envelope(
            "listZones",
            &response(
                200,
                r#"{"listzonesresponse":{"count":1,"zone":[{"id":"z"}]}}"#,
            ),
        )
        .unwrap();
        assert_eq!(ok["count"], 1);
        let empty = unwrap_envelope("listZones", &response(200, r#"{"listzonesresponse":{}}"#));
        assert_eq!(empty.unwrap(), serde_json::json!({}));
        assert!(matches!(
            unwrap_envelope("listZones", &response(200, "<html>")),
            Err(ProviderError::Transient(_))
        ));
    }

    #[test]
    fn error_codes() {
        let err = |status: u16, code: u16, text: &str| {
            unwrap_envelope(
                "deleteLoadBalancerRule",
                &response(
                    status,
                    &format!(r#"{{"x":{{"uuidList":[],"errorcode":{code},"cserrorcode":9999,"errortext":"{text}"}}}}"#),
                ),
            )
            .unwrap_err()
        };
        assert!(
            matches!(err(401, 401, "unable to verify"), ProviderError::Unauthorized(m) if !m.contains("apiKey=secret"))
        );
        assert!(matches!(
            err(
                431,
                431,
                "Invalid parameter id value=9 due to incorrect long value format, or entity does not exist"
            ),
            ProviderError::NotFound(_)
        ));
        assert!(matches!(
            err(431, 431, "bad cidr"),
            ProviderError::Permanent(_)
        ));
        assert!(
            matches!(err(432, 432, "not available"), ProviderError::Permanent(m) if m.contains("admin-only"))
        );
        assert!(matches!(err(530, 530, "boom"), ProviderError::Transient(_)));
        assert!(matches!(
            err(537, 537, "conflicts"),
            ProviderError::Permanent(_)
        ));
        assert!(matches!(
            unwrap_envelope("x", &response(502, "bad gateway")),
            Err(ProviderError::Transient(m)) if m.contains("bad gateway")
        ));
    }

    #[test]
    fn uuids() {
        assert!(is_uuid("6a3d7c2e-0000-4000-8000-00000000000a"));
        assert!(!is_uuid("my-project"));
        assert!(!is_uuid("6a3d7c2e-0000-4000-8000-00000000000"));
    }

    #[test]
    fn pages_are_merged_once_by_id() {
        let mut items = Vec::new();
        let mut seen = BTreeSet::new();
        let page = |ids: &[&str]| -> Vec<Value> {
            ids.iter()
                .map(|id| serde_json::json!({"id": id, "name": "web-1"}))
                .collect()
        };
        assert_eq!(merge_page(&mut items, &mut seen, page(&["a", "b"])), 2);
        // Offsets that shifted: "b" again, and "c" new.
        assert_eq!(merge_page(&mut items, &mut seen, page(&["b", "c"])), 1);
        // A page of only items seen before adds nothing (the caller's error).
        assert_eq!(merge_page(&mut items, &mut seen, page(&["a", "c"])), 0);
        let ids: Vec<&str> = items.iter().filter_map(|i| i["id"].as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        // Items without an id cannot be told apart: all kept.
        let anonymous = vec![
            serde_json::json!({"key": "k"}),
            serde_json::json!({"key": "k"}),
        ];
        assert_eq!(merge_page(&mut items, &mut seen, anonymous), 2);
        assert_eq!(items.len(), 5);
    }
}
