//! Asynchronous jobs. A mutating command answers at once with a job ID; what it changes is
//! visible in a transitional state (`Add`, `Allocating`, `Revoke`, `Releasing`) until the job
//! completes, which happens on the configured number of `queryAsyncJobResult` polls, after the
//! configured duration, or on `settle()`. A job marked to fail rolls its change back instead and
//! reports `jobstatus: 2`.

use std::time::Instant;

use serde_json::{Value, json};

use super::commands::assign_refusal;
use super::job::{Effect, Job, Outcome};
use super::model::{IpState, RuleState, State, Tag};
use super::render::{now_cs, render_acl_item, render_firewall_rule, render_ip, render_lb_rule};
use crate::serving::new_uuid;

/// Completed jobs kept for `queryAsyncJobResult`; older ones are forgotten first (bounds memory
/// in long benchmark runs).
pub(crate) const JOB_HISTORY: usize = 10_000;

impl State {
    /// Starts a job for `effect` (already visible in its transitional state); returns the
    /// command's immediate answer `{"jobid", "id"?}`.
    pub(crate) fn submit(&mut self, effect: Effect, now: Instant) -> Value {
        let command = effect.command().to_lowercase();
        let fail = match self.settings.failing_jobs.get_mut(&command) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        };
        self.settings.failing_jobs.retain(|_, n| *n > 0);
        let mut answer = if effect.creates() {
            json!({"id": effect.instance_id().unwrap_or_default()})
        } else {
            json!({})
        };
        let job = Job {
            id: new_uuid(),
            effect,
            created: now_cs(),
            polls: 0,
            polls_needed: self.settings.job_polls,
            due: self
                .settings
                .job_duration
                .map(|d| now.checked_add(d).unwrap_or(now)),
            fail,
            outcome: None,
            completed: None,
        };
        let id = job.id.clone();
        let at_once = job.due.is_none() && job.polls_needed == 0;
        self.jobs.push(job);
        if at_once {
            self.complete(&id);
        }
        self.forget_old_jobs();
        answer["jobid"] = id.into();
        answer
    }

    /// Drops the oldest completed jobs beyond [`JOB_HISTORY`].
    fn forget_old_jobs(&mut self) {
        let done = self.jobs.iter().filter(|j| j.outcome.is_some()).count();
        let mut excess = done.saturating_sub(JOB_HISTORY);
        if excess > 0 {
            self.jobs.retain(|j| {
                if excess > 0 && j.outcome.is_some() {
                    excess -= 1;
                    false
                } else {
                    true
                }
            });
        }
    }

    /// Completes the time-based jobs that are due.
    pub(crate) fn advance(&mut self, now: Instant) {
        let due: Vec<String> = self
            .jobs
            .iter()
            .filter(|j| j.outcome.is_none() && j.due.is_some_and(|d| d <= now))
            .map(|j| j.id.clone())
            .collect();
        for id in due {
            self.complete(&id);
        }
    }

    /// Completes every pending job now, oldest first.
    pub(crate) fn settle(&mut self) {
        let pending: Vec<String> = self
            .jobs
            .iter()
            .filter(|j| j.outcome.is_none())
            .map(|j| j.id.clone())
            .collect();
        for id in pending {
            self.complete(&id);
        }
    }

    /// Completes the pending jobs of `command` (any case) now, oldest first.
    pub(crate) fn settle_command(&mut self, command: &str) {
        let pending: Vec<String> = self
            .jobs
            .iter()
            .filter(|j| j.outcome.is_none() && j.effect.command().eq_ignore_ascii_case(command))
            .map(|j| j.id.clone())
            .collect();
        for id in pending {
            self.complete(&id);
        }
    }

    /// Pending jobs.
    pub(crate) fn pending_jobs(&self) -> usize {
        self.jobs.iter().filter(|j| j.outcome.is_none()).count()
    }

    /// A `queryAsyncJobResult` poll: counts it, completes the job when it has had its polls,
    /// and renders it. None for an unknown job.
    pub(crate) fn poll(&mut self, id: &str) -> Option<Value> {
        let job = self.jobs.iter_mut().find(|j| j.id == id)?;
        if job.outcome.is_none() {
            job.polls = job.polls.saturating_add(1);
            if job.due.is_none() && job.polls >= job.polls_needed {
                self.complete(id);
            }
        }
        let job = self.jobs.iter().find(|j| j.id == id)?;
        Some(self.render_job(job))
    }

    /// Ends a pending job: applies its effect, or rolls it back when it is to fail.
    fn complete(&mut self, id: &str) {
        let Some(job) = self.jobs.iter().find(|j| j.id == id && j.outcome.is_none()) else {
            return;
        };
        let (effect, fail) = (job.effect.clone(), job.fail);
        let outcome = if fail {
            self.roll_back(&effect);
            Outcome::Failed(530, effect.failure_text())
        } else {
            self.apply(&effect)
        };
        if let Some(job) = self.jobs.iter_mut().find(|j| j.id == id) {
            job.outcome = Some(outcome);
            job.completed = Some(now_cs());
        }
    }

    /// Carries out a job's effect; the outcome holds the `jobresult`.
    fn apply(&mut self, effect: &Effect) -> Outcome {
        let gone =
            |what: &str, id: &str| Outcome::Failed(530, format!("{what} {id} no longer exists"));
        let success = Outcome::Succeeded(json!({"success": true}));
        match effect {
            Effect::CreateLbRule { id } | Effect::UpdateLbRule { id, .. } => {
                let Some(rule) = self.lb_rule_mut(id) else {
                    return gone("Load balancer rule", id);
                };
                if rule.state == RuleState::Add {
                    rule.state = RuleState::Active;
                }
                let Some(rule) = self.lb_rule(id) else {
                    return gone("Load balancer rule", id);
                };
                Outcome::Succeeded(json!({"loadbalancer": render_lb_rule(self, rule)}))
            }
            Effect::DeleteLbRule { id, .. } => {
                self.remove_lb_rule(id);
                success
            }
            Effect::Assign { id, vms } => {
                let Some(rule) = self.lb_rule(id) else {
                    return gone("Load balancer rule", id);
                };
                // The VMs are checked when the job runs, as CloudStack's execute does: a VM
                // destroyed since the command was accepted fails the whole job.
                if let Some(text) = assign_refusal(self, rule, vms) {
                    return Outcome::Failed(431, text);
                }
                if let Some(rule) = self.lb_rule_mut(id) {
                    rule.members.extend(vms.iter().cloned());
                }
                success
            }
            Effect::Remove { id, vms } => {
                if let Some(rule) = self.lb_rule_mut(id) {
                    for vm in vms {
                        rule.members.remove(vm);
                    }
                }
                success
            }
            Effect::Associate { id } => {
                let Some(ip) = self.ip_mut(id) else {
                    return gone("IP address", id);
                };
                if ip.state == IpState::Allocating {
                    ip.state = IpState::Allocated;
                    ip.allocated = Some(now_cs());
                }
                let Some(ip) = self.ip(id) else {
                    return gone("IP address", id);
                };
                Outcome::Succeeded(json!({"ipaddress": render_ip(self, ip)}))
            }
            Effect::Disassociate {
                id,
                before,
                lb_rules,
                firewall_rules,
            } => {
                if *before != IpState::Free {
                    for (rule, _) in lb_rules {
                        self.remove_lb_rule(rule);
                    }
                    for (rule, _) in firewall_rules {
                        self.remove_firewall_rule(rule);
                    }
                    if let Some(ip) = self.ip_mut(id) {
                        ip.release();
                    }
                    self.drop_tags("PublicIpAddress", id);
                }
                success
            }
            Effect::CreateFirewallRule { id } => {
                let Some(rule) = self.firewall_rule_mut(id) else {
                    return gone("Firewall rule", id);
                };
                rule.state = RuleState::Active;
                let Some(rule) = self.firewall_rule(id) else {
                    return gone("Firewall rule", id);
                };
                Outcome::Succeeded(json!({"firewallrule": render_firewall_rule(self, rule)}))
            }
            Effect::DeleteFirewallRule { id, .. } => {
                self.remove_firewall_rule(id);
                success
            }
            Effect::CreateAclItem { id } => {
                let Some(item) = self.acl_item_mut(id) else {
                    return gone("Network ACL item", id);
                };
                item.state = RuleState::Active;
                let Some(item) = self.acl_item(id) else {
                    return gone("Network ACL item", id);
                };
                Outcome::Succeeded(json!({"networkacl": render_acl_item(self, item)}))
            }
            Effect::DeleteAclItem { id, .. } => {
                self.remove_acl_item(id);
                success
            }
            Effect::CreateTags { tags, refused } => {
                if let Some((code, text)) = refused {
                    return Outcome::Failed(*code, text.clone());
                }
                // One transaction: a key already on a resource (the unique key on resource,
                // type and key) fails the whole job with `CloudRuntimeException` (530) "tag %s
                // already on %s with id %s", and no tag of the call stays.
                for tag in tags {
                    if self.tags.iter().any(|t| {
                        t.on(tag.resource_type, &tag.resource_id)
                            && t.key.eq_ignore_ascii_case(&tag.key)
                    }) {
                        return Outcome::Failed(
                            530,
                            format!(
                                "tag {} already on {} with id {}",
                                tag.key, tag.resource_type, tag.resource_id
                            ),
                        );
                    }
                }
                // A resource removed since the command was accepted.
                if let Some(gone_tag) = tags.iter().find(|t| {
                    !super::commands::tag_target_exists(self, t.resource_type, &t.resource_id)
                }) {
                    return Outcome::Failed(
                        431,
                        format!(
                            "Unable to find resource by uuid {} and type {}",
                            gone_tag.resource_id, gone_tag.resource_type
                        ),
                    );
                }
                self.tags.extend(tags.iter().cloned());
                success
            }
            Effect::DeleteTags {
                resource_type,
                resource_ids,
                keys,
                refused,
            } => {
                if let Some((code, text)) = refused {
                    return Outcome::Failed(*code, text.clone());
                }
                // `TaggedResourceManagerImpl.deleteTags`: a tag goes when its key matches (any
                // case) and, when a value is given, its value too (any case); no tags given
                // deletes them all.
                let doomed = |t: &Tag| {
                    resource_ids.iter().any(|id| t.on(resource_type, id))
                        && (keys.is_empty()
                            || keys.iter().any(|(k, v)| {
                                t.key.eq_ignore_ascii_case(k)
                                    && v.as_deref().is_none_or(|v| t.value.eq_ignore_ascii_case(v))
                            }))
                };
                if !self.tags.iter().any(doomed) {
                    return Outcome::Failed(530, effect.failure_text());
                }
                self.tags.retain(|t| !doomed(t));
                success
            }
        }
    }

    /// Undoes what a failing job's command already changed.
    fn roll_back(&mut self, effect: &Effect) {
        match effect {
            Effect::CreateLbRule { id } => self.remove_lb_rule(id),
            Effect::UpdateLbRule { id, before } => {
                if let Some(rule) = self.lb_rule_mut(id) {
                    // Membership may have changed meanwhile; only the rule's own fields revert.
                    let members = std::mem::take(&mut rule.members);
                    *rule = (**before).clone();
                    rule.members = members;
                }
            }
            Effect::DeleteLbRule { id, before } => {
                if let Some(rule) = self.lb_rule_mut(id) {
                    rule.state = *before;
                }
            }
            Effect::Assign { .. } | Effect::Remove { .. } => {}
            Effect::Associate { id } => {
                if let Some(ip) = self.ip_mut(id) {
                    ip.release();
                }
            }
            Effect::Disassociate {
                id,
                before,
                lb_rules,
                firewall_rules,
            } => {
                if let Some(ip) = self.ip_mut(id) {
                    ip.state = *before;
                }
                for (rule, state) in lb_rules {
                    if let Some(r) = self.lb_rule_mut(rule) {
                        r.state = *state;
                    }
                }
                for (rule, state) in firewall_rules {
                    if let Some(r) = self.firewall_rule_mut(rule) {
                        r.state = *state;
                    }
                }
            }
            Effect::CreateFirewallRule { id } => self.remove_firewall_rule(id),
            Effect::DeleteFirewallRule { id, before } => {
                if let Some(rule) = self.firewall_rule_mut(id) {
                    rule.state = *before;
                }
            }
            Effect::CreateAclItem { id } => self.remove_acl_item(id),
            Effect::DeleteAclItem { id, before } => {
                if let Some(item) = self.acl_item_mut(id) {
                    item.state = *before;
                }
            }
            // Nothing was written before the job ran.
            Effect::CreateTags { .. } | Effect::DeleteTags { .. } => {}
        }
    }

    /// A job as `queryAsyncJobResult` answers it; pending jobs have no `jobresult`.
    pub(crate) fn render_job(&self, job: &Job) -> Value {
        // `jobresultcode` is 0 whatever the outcome, as in every recorded answer.
        let (status, result) = match &job.outcome {
            None => (0, None),
            Some(Outcome::Succeeded(result)) => (1, Some(result.clone())),
            // A failed job as a real server answers it (the queryAsyncJobResult bodies recorded in
            // exoscale/egoscale#322 and #325): `jobresultcode` stays 0 and `jobresult` holds only
            // `errorcode` (530, `ApiErrorCode.INTERNAL_ERROR`) and `errortext`.
            Some(Outcome::Failed(code, text)) => (
                2,
                Some(json!({
                    "errorcode": code,
                    "errortext": text,
                })),
            ),
        };
        let mut body = json!({
            "jobid": job.id,
            "accountid": self.account.account_id,
            "userid": self.account.user_id,
            "cmd": job.effect.class(),
            "jobstatus": status,
            "jobprocstatus": 0,
            "jobresultcode": 0,
            "jobresulttype": "object",
            "created": job.created,
        });
        if let (Some(kind), Some(id)) = (job.effect.instance_type(), job.effect.instance_id()) {
            body["jobinstancetype"] = kind.into();
            body["jobinstanceid"] = id.into();
        }
        if let Some(result) = result {
            body["jobresult"] = result;
        }
        if let Some(completed) = &job.completed {
            body["completed"] = completed.clone().into();
        }
        body
    }
}
