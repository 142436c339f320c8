//! The API handlers: servers, IP blocks and their tags, public networks and block assignment,
//! and the tag manager. Each runs under the state lock after due transitions were completed.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::auth::parse_form;
use super::error::{ApiError, json_response};
use super::model::{
    Assignment, IpBlock, LOCATIONS, State, Tag, TagValue, new_id, now_rfc3339,
    parse_create_block_size, render_block, render_network, render_network_block, render_server,
    render_tag, valid_tag_value,
};

/// What a handler answers on success.
#[derive(Debug)]
pub(crate) enum Reply {
    /// 200 with a body.
    Ok(Value),
    /// 201 with the created object.
    Created(Value),
    /// 202: accepted, completes asynchronously.
    Accepted(Value),
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Ok(v) => json_response(200, &v),
            Reply::Created(v) => json_response(201, &v),
            Reply::Accepted(v) => json_response(202, &v),
        }
    }
}

/// A request body that must be JSON.
fn json_body(body: &[u8]) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(400, "Required request body is missing."));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::new(400, format!("Malformed JSON request: {e}")))
}

/// A body that must be a JSON object.
fn object_body(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    match json_body(body)? {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::validation(vec![
            "body: must be a JSON object".into(),
        ])),
    }
}

/// A string field; absent or null is None (an error when `required`), another type an error.
fn string_field(
    obj: &Map<String, Value>,
    key: &str,
    at: &str,
    required: bool,
    errors: &mut Vec<String>,
) -> Option<String> {
    match obj.get(key) {
        None | Some(Value::Null) => {
            if required {
                errors.push(format!("{at}{key}: must not be null"));
            }
            None
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            errors.push(format!("{at}{key}: must be a string"));
            None
        }
    }
}

/// A list of `{name, value?}` tag assignments: names must exist in the tag manager and appear
/// once; values are letters, digits, `_` and `-`.
fn tag_values(state: &State, v: &Value, field: &str, errors: &mut Vec<String>) -> Vec<TagValue> {
    let Some(items) = v.as_array() else {
        errors.push(format!("{field}: must be a list"));
        return Vec::new();
    };
    let mut out: Vec<TagValue> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{field}[{i}].");
        let Some(obj) = item.as_object() else {
            errors.push(format!("{field}[{i}]: must be an object"));
            continue;
        };
        let name = string_field(obj, "name", &at, true, errors);
        let value = string_field(obj, "value", &at, false, errors);
        if let Some(v) = &value
            && !valid_tag_value(v)
        {
            errors.push(format!(
                "{at}value: {v:?} must match [A-zÀ-ú0-9_-]{{1,100}}"
            ));
        }
        let Some(name) = name else { continue };
        if state.tag_named(&name).is_none() {
            errors.push(format!(
                "{at}name: tag {name:?} does not exist; create it in the tag manager first"
            ));
        } else if out.iter().any(|t| t.name == name) {
            errors.push(format!("{at}name: tag {name:?} is given twice"));
        } else {
            out.push(TagValue { name, value });
        }
    }
    out
}

/// `tag=name.value` (or `tag=name`) query parameters: all must match.
fn tag_filters(query: &str) -> Vec<(String, Option<String>)> {
    parse_form(query)
        .into_iter()
        .filter(|(k, _)| k == "tag")
        .map(|(_, v)| match v.split_once('.') {
            Some((name, value)) => (name.to_string(), Some(value.to_string())),
            None => (v, None),
        })
        .collect()
}

fn matches_tags(block: &IpBlock, filters: &[(String, Option<String>)]) -> bool {
    filters.iter().all(|(name, value)| {
        block
            .tags
            .iter()
            .any(|t| &t.name == name && value.as_ref().is_none_or(|v| t.value.as_ref() == Some(v)))
    })
}

/// The first value of a query parameter.
fn query_param(query: &str, key: &str) -> Option<String> {
    parse_form(query)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

fn block_index(state: &State, id: &str) -> Result<usize, ApiError> {
    state
        .blocks
        .iter()
        .position(|b| b.id == id)
        .ok_or_else(|| ApiError::not_found("IP Block", id))
}

// --- bmc/v1 -----------------------------------------------------------------------------------

/// `GET /bmc/v1/servers` (bmcapi.spec.yaml `GET /servers`: 200, an array of `Server`).
pub(crate) fn list_servers(state: &State) -> Reply {
    Reply::Ok(state.servers.iter().map(render_server).collect())
}

/// `GET /bmc/v1/servers/{id}`; an unknown or deleted server answers
/// [`State::gone_server_status`]: 403 by default, as the real API (upstream commit d84a2c5;
/// bmcapi.spec.yaml documents no 404 here; review finding S2), or 404.
pub(crate) fn get_server(state: &State, id: &str) -> Result<Reply, ApiError> {
    state
        .server(id)
        .map(|s| Reply::Ok(render_server(s)))
        .ok_or_else(|| match state.gone_server_status {
            404 => ApiError::not_found("Server", id),
            status => ApiError::new(
                status,
                "The server does not exist or you do not have permission to access it.",
            ),
        })
}

// --- ips/v1 -----------------------------------------------------------------------------------

/// `GET /ips/v1/ip-blocks?tag=name.value...` (ipapi.spec.yaml `GET /ip-blocks`, `tag` query
/// parameter "in the form tagName.tagValue", `explode: true`; several must all match).
pub(crate) fn list_blocks(state: &State, query: &str) -> Reply {
    let filters = tag_filters(query);
    Reply::Ok(
        state
            .blocks
            .iter()
            .filter(|b| matches_tags(b, &filters))
            .map(|b| render_block(state, b))
            .collect(),
    )
}

/// `GET /ips/v1/ip-blocks/{id}` (ipapi.spec.yaml: 200 `IpBlock`). An unknown ID answers 404,
/// which the spec does not list for this operation (it lists 401, 403, 500); kept as the API's
/// generic not-found (not checked against the real API).
pub(crate) fn get_block(state: &State, id: &str) -> Result<Reply, ApiError> {
    let i = block_index(state, id)?;
    Ok(Reply::Ok(render_block(state, &state.blocks[i])))
}

/// `POST /ips/v1/ip-blocks` (ipapi.spec.yaml `IpBlockCreate`: 201 `IpBlock`, 400 validation,
/// 406 when no block of the size is available): a new `unassigned` block from the pools.
pub(crate) fn create_block(state: &mut State, body: &[u8]) -> Result<Reply, ApiError> {
    let obj = object_body(body)?;
    let mut errors = Vec::new();
    let location = string_field(&obj, "location", "", true, &mut errors);
    if let Some(l) = &location
        && !LOCATIONS.contains(&l.as_str())
    {
        errors.push(format!(
            "location: {l:?} must be one of {}",
            LOCATIONS.join(", ")
        ));
    }
    let size = string_field(&obj, "cidrBlockSize", "", true, &mut errors).and_then(|s| {
        parse_create_block_size(&s)
            .map_err(|e| errors.push(format!("cidrBlockSize: {e}")))
            .ok()
    });
    if let Some(v) = string_field(&obj, "ipVersion", "", false, &mut errors)
        && v != "V4"
    {
        errors.push(format!(
            "ipVersion: {v:?} is not simulated (IPv4 blocks only)"
        ));
    }
    let description = string_field(&obj, "description", "", false, &mut errors);
    let tags = match obj.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => tag_values(state, v, "tags", &mut errors),
    };
    let (Some(location), Some(size), true) = (location, size, errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    let cidr = state.allocate(size).ok_or_else(|| {
        ApiError::new(
            406,
            format!("No IP Block of size /{size} is available in {location}."),
        )
    })?;
    let block = IpBlock {
        id: new_id(),
        location,
        cidr,
        status: "unassigned".into(),
        assignment: None,
        due: None,
        description,
        tags,
        bring_your_own: false,
        created_on: now_rfc3339(),
    };
    let rendered = render_block(state, &block);
    state.blocks.push(block);
    Ok(Reply::Created(rendered))
}

/// `PUT /ips/v1/ip-blocks/{id}/tags` (ipapi.spec.yaml: body `TagAssignmentRequest[]`, 200
/// `IpBlock`): replaces the block's tags.
pub(crate) fn put_block_tags(state: &mut State, id: &str, body: &[u8]) -> Result<Reply, ApiError> {
    let i = block_index(state, id)?;
    let value = json_body(body)?;
    let mut errors = Vec::new();
    let tags = tag_values(state, &value, "tags", &mut errors);
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    state.blocks[i].tags = tags;
    Ok(Reply::Ok(render_block(state, &state.blocks[i])))
}

/// `PATCH /ips/v1/ip-blocks/{id}` `{"description"?}` (ipapi.spec.yaml `IpBlockPatch`:
/// `description`, `maxLength: 250`): 200 with the block.
pub(crate) fn patch_block(state: &mut State, id: &str, body: &[u8]) -> Result<Reply, ApiError> {
    let i = block_index(state, id)?;
    let obj = object_body(body)?;
    let mut errors = Vec::new();
    let description = string_field(&obj, "description", "", false, &mut errors);
    if description
        .as_ref()
        .is_some_and(|d| d.chars().count() > 250)
    {
        errors.push("description: must be at most 250 characters".into());
    }
    if !errors.is_empty() {
        return Err(ApiError::validation(errors));
    }
    if description.is_some() {
        state.blocks[i].description = description;
    }
    Ok(Reply::Ok(render_block(state, &state.blocks[i])))
}

/// `DELETE /ips/v1/ip-blocks/{id}` (ipapi.spec.yaml: 200 `DeleteIpBlockResult`): only an
/// `unassigned` block. The 409 for any other block is not in the spec (it lists 401, 403, 500);
/// the operation's description says the block must be unassigned first.
pub(crate) fn delete_block(state: &mut State, id: &str) -> Result<Reply, ApiError> {
    let i = block_index(state, id)?;
    let block = &state.blocks[i];
    if let Some(a) = &block.assignment {
        return Err(ApiError::new(
            409,
            format!(
                "IP Block {id} is {} to {} {}; unassign it before deleting it.",
                if block.status == "assigning" {
                    "being assigned"
                } else {
                    "assigned"
                },
                a.resource_type,
                a.resource_id
            ),
        ));
    }
    if block.status != "unassigned" {
        return Err(ApiError::new(
            409,
            format!(
                "IP Block {id} is {}; only unassigned blocks can be deleted.",
                block.status
            ),
        ));
    }
    state.blocks.remove(i);
    Ok(Reply::Ok(
        json!({"result": "IP Block is being deleted.", "ipBlockId": id}),
    ))
}

// --- networks/v1 ------------------------------------------------------------------------------

/// `GET /networks/v1/public-networks[?location=PHX]`.
pub(crate) fn list_networks(state: &State, query: &str) -> Reply {
    let location = query_param(query, "location");
    Reply::Ok(
        state
            .networks
            .iter()
            .filter(|n| location.as_ref().is_none_or(|l| &n.location == l))
            .map(|n| render_network(state, n))
            .collect(),
    )
}

/// `GET /networks/v1/public-networks/{id}` (networkapi.spec.yaml: 200 `PublicNetwork`, whose
/// `location` is required; the driver checks it before creating blocks, review finding D1).
pub(crate) fn get_network(state: &State, id: &str) -> Result<Reply, ApiError> {
    state
        .network(id)
        .map(|n| Reply::Ok(render_network(state, n)))
        .ok_or_else(|| ApiError::not_found("Public Network", id))
}

/// `POST /networks/v1/public-networks/{id}/ip-blocks` `{"id": block}` (networkapi.spec.yaml
/// `PublicNetworkIpBlockCreate`: 202 `PublicNetworkIpBlock`, 400, 409): starts `assigning`. A
/// block in another location is 400: the spec names no error for it, but a block cannot be
/// routed to a VLAN in another location (review finding D1).
pub(crate) fn assign_block(
    state: &mut State,
    now: Instant,
    network_id: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let network = state
        .network(network_id)
        .ok_or_else(|| ApiError::not_found("Public Network", network_id))?;
    let network_location = network.location.clone();
    let obj = object_body(body)?;
    let mut errors = Vec::new();
    let Some(block_id) = string_field(&obj, "id", "", true, &mut errors) else {
        return Err(ApiError::validation(errors));
    };
    let i = block_index(state, &block_id)?;
    let block = &state.blocks[i];
    // A failed assignment (`error assigning`, a documented IpBlock status) may be retried: the
    // block is not routed anywhere (upstream re-assigned such blocks; review finding D5).
    let retry = block.status == "error assigning";
    if let Some(a) = block.assignment.as_ref().filter(|_| !retry) {
        return Err(ApiError::new(
            409,
            format!(
                "IP Block {block_id} is already assigned to {} {}.",
                a.resource_type, a.resource_id
            ),
        ));
    }
    if block.status != "unassigned" && !retry {
        return Err(ApiError::new(
            409,
            format!(
                "IP Block {block_id} is {}; it cannot be assigned.",
                block.status
            ),
        ));
    }
    if block.location != network_location {
        return Err(ApiError::new(
            400,
            format!(
                "IP Block {block_id} is in {}, public network {network_id} is in {network_location}.",
                block.location
            ),
        ));
    }
    let due = state.due(now);
    let resource_type = state.network_resource_type.clone();
    let block = &mut state.blocks[i];
    block.status = "assigning".into();
    block.assignment = Some(Assignment {
        resource_id: network_id.to_string(),
        resource_type,
    });
    block.due = Some(due);
    Ok(Reply::Accepted(render_network_block(block)))
}

/// `DELETE /networks/v1/public-networks/{id}/ip-blocks/{block}`: starts `unassigning`.
pub(crate) fn unassign_block(
    state: &mut State,
    now: Instant,
    network_id: &str,
    block_id: &str,
) -> Result<Reply, ApiError> {
    if state.network(network_id).is_none() {
        return Err(ApiError::not_found("Public Network", network_id));
    }
    let i = block_index(state, block_id)?;
    let due = state.due(now);
    let block = &mut state.blocks[i];
    // networkapi.spec.yaml `DELETE /public-networks/{id}/ip-blocks/{ipBlockId}` documents 202,
    // 400, 401, 403, 409 and 500, no 404: a block that is not on this network is a bad request
    // (review finding S4), a block in transition a conflict.
    if !block.on_network(network_id) {
        return Err(ApiError::new(
            400,
            format!("IP Block {block_id} is not assigned to public network {network_id}."),
        ));
    }
    if matches!(block.status.as_str(), "assigning" | "unassigning") {
        return Err(ApiError::new(
            409,
            format!("IP Block {block_id} is {}; try again later.", block.status),
        ));
    }
    block.status = "unassigning".into();
    block.due = Some(due);
    Ok(Reply::Accepted(Value::String(
        "Removing IP Block from the public network.".into(),
    )))
}

// --- tag-manager/v1 ---------------------------------------------------------------------------

/// `GET /tag-manager/v1/tags[?name=...]`.
pub(crate) fn list_tags(state: &State, query: &str) -> Reply {
    let name = query_param(query, "name");
    Reply::Ok(
        state
            .tags
            .iter()
            .filter(|t| name.as_ref().is_none_or(|n| &t.name == n))
            .map(|t| render_tag(state, t))
            .collect(),
    )
}

/// `GET /tag-manager/v1/tags/{id}`.
pub(crate) fn get_tag(state: &State, id: &str) -> Result<Reply, ApiError> {
    state
        .tags
        .iter()
        .find(|t| t.id == id)
        .map(|t| Reply::Ok(render_tag(state, t)))
        .ok_or_else(|| ApiError::not_found("Tag", id))
}

/// `POST /tag-manager/v1/tags` `{"name", "isBillingTag", "description"?}` (tagapi.spec.yaml
/// `TagCreate`: 201 `Tag`; 409 for a name that exists, review finding D4).
pub(crate) fn create_tag(state: &mut State, body: &[u8]) -> Result<Reply, ApiError> {
    let obj = object_body(body)?;
    let mut errors = Vec::new();
    let name = string_field(&obj, "name", "", true, &mut errors);
    if name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        errors.push("name: must not be blank".into());
    }
    let billing = match obj.get("isBillingTag") {
        Some(Value::Bool(b)) => Some(*b),
        None | Some(Value::Null) => {
            errors.push("isBillingTag: must not be null".into());
            None
        }
        Some(_) => {
            errors.push("isBillingTag: must be a boolean".into());
            None
        }
    };
    let description = string_field(&obj, "description", "", false, &mut errors);
    let (Some(name), Some(billing), true) = (name, billing, errors.is_empty()) else {
        return Err(ApiError::validation(errors));
    };
    if state.tag_named(&name).is_some() {
        return Err(ApiError::new(
            409,
            format!("Tag with name {name} already exists."),
        ));
    }
    let tag = Tag {
        id: new_id(),
        name,
        description,
        billing,
    };
    let rendered = render_tag(state, &tag);
    state.tags.push(tag);
    Ok(Reply::Created(rendered))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_filters_split_at_the_first_dot() {
        assert_eq!(
            tag_filters("tag=cluster.a-b&x=1&tag=usage&tag=n.v.w"),
            [
                ("cluster".to_string(), Some("a-b".to_string())),
                ("usage".to_string(), None),
                ("n".to_string(), Some("v.w".to_string())),
            ]
        );
    }
}
