//! The API handlers: servers, IP blocks and their tags, public networks and block assignment,
//! and the tag manager. Each runs under the state lock after due transitions were completed.

use std::time::Instant;

use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::auth::parse_form;
use super::error::{ApiError, json_response};
use super::model::{
    Assignment, IpBlock, LOCATIONS, State, TAG_TEXT_RULE, Tag, TagValue, new_id, now_rfc3339,
    parse_create_block_size, render_block, render_network, render_network_block, render_server,
    render_tag, valid_tag_text,
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
/// once; values follow [`valid_tag_text`] (the specs' `TagAssignmentRequest.value`).
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
            && !valid_tag_text(v)
        {
            errors.push(format!("{at}value: {v:?} must be {TAG_TEXT_RULE}"));
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

/// The `tag` query parameters of `GET /ips/v1/ip-blocks` and `GET /bmc/v1/servers`
/// (ipapi.spec.yaml `ipBlocksGet` "List of tags, in the form tagName.tagValue, to filter by",
/// bmcapi.spec.yaml `serversGet` "in the form of tagName.tagValue"; `explode: true`, so one
/// `tag=` per filter). Split at the first dot (a tag name holds no dot: [`valid_tag_text`]). A
/// filter without a dot is not in the documented form and is refused (400): whether the real
/// API reads it as "any value" is not documented, and a client relying on that should fail here.
fn tag_filters(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    let mut filters = Vec::new();
    for (_, v) in parse_form(query).into_iter().filter(|(k, _)| k == "tag") {
        match v.split_once('.') {
            Some((name, value)) if !name.is_empty() => {
                filters.push((name.to_string(), value.to_string()));
            }
            _ => {
                return Err(ApiError::validation(vec![format!(
                    "tag: {v:?} is not in the form tagName.tagValue"
                )]));
            }
        }
    }
    Ok(filters)
}

/// Whether `tags` carry every filter's name with exactly its value (several filters: all must
/// match, as the specs' list of filters).
fn matches_tags(tags: &[TagValue], filters: &[(String, String)]) -> bool {
    filters.iter().all(|(name, value)| {
        tags.iter()
            .any(|t| &t.name == name && t.value.as_deref() == Some(value.as_str()))
    })
}

/// The first value of a query parameter.
fn query_param(query: &str, key: &str) -> Option<String> {
    parse_form(query)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// The answer for an ID this account cannot see, where the operation's spec lists 403 and no
/// 404: the `Forbidden` response, "this resource cannot be accessed by the provided
/// credentials". The real API answers a deleted server so (upstream commit d84a2c5), and the
/// IP-block, public-network and tag operations document the same set (401, 403, 500).
fn forbidden(what: &str, id: &str) -> ApiError {
    ApiError::new(
        403,
        format!("{what} {id} does not exist or you do not have permission to access it."),
    )
}

/// The index of a block; an unknown ID is [`forbidden`] (ipapi.spec.yaml lists 403 and no 404
/// for `GET`/`DELETE /ip-blocks/{id}` and `PUT /ip-blocks/{id}/tags`).
fn block_index(state: &State, id: &str) -> Result<usize, ApiError> {
    state
        .blocks
        .iter()
        .position(|b| b.id == id)
        .ok_or_else(|| forbidden("IP Block", id))
}

// --- bmc/v1 -----------------------------------------------------------------------------------

/// `GET /bmc/v1/servers[?tag=name.value...]` (bmcapi.spec.yaml `serversGet`: 200, an array of
/// `Server`; the `tag` filters as [`tag_filters`]).
pub(crate) fn list_servers(state: &State, query: &str) -> Result<Reply, ApiError> {
    let filters = tag_filters(query)?;
    Ok(Reply::Ok(
        state
            .servers
            .iter()
            .filter(|s| matches_tags(&s.tags, &filters))
            .map(|s| render_server(state, s))
            .collect(),
    ))
}

/// `GET /bmc/v1/servers/{id}`; an unknown or deleted server answers
/// [`State::gone_server_status`]: 403 by default, as the real API (upstream commit d84a2c5;
/// bmcapi.spec.yaml documents no 404 here; review finding S2), or 404.
pub(crate) fn get_server(state: &State, id: &str) -> Result<Reply, ApiError> {
    state
        .server(id)
        .map(|s| Reply::Ok(render_server(state, s)))
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
pub(crate) fn list_blocks(state: &State, query: &str) -> Result<Reply, ApiError> {
    let filters = tag_filters(query)?;
    Ok(Reply::Ok(
        state
            .blocks
            .iter()
            .filter(|b| matches_tags(&b.tags, &filters))
            .map(|b| render_block(state, b))
            .collect(),
    ))
}

/// `GET /ips/v1/ip-blocks/{id}` (ipapi.spec.yaml `ipBlocksIpBlockIdGet`: 200 `IpBlock`, 401,
/// 403, 500). An unknown ID is 403 ([`forbidden`]): the spec lists no 404 here.
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
/// `description`, `maxLength: 250`): 200 with the block. This operation is the one IP-block
/// operation whose spec lists 404 (`ipBlocksIpBlockIdPatch`), so an unknown ID answers 404.
pub(crate) fn patch_block(state: &mut State, id: &str, body: &[u8]) -> Result<Reply, ApiError> {
    let i = state
        .blocks
        .iter()
        .position(|b| b.id == id)
        .ok_or_else(|| ApiError::not_found("IP Block", id))?;
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

/// `DELETE /ips/v1/ip-blocks/{id}` (ipapi.spec.yaml `ipBlocksIpBlockIdDelete`: 200
/// `DeleteIpBlockResult`, 401, 403, 500): only an `unassigned` block ("An IP Block can only be
/// deleted if not assigned to any resource."). The spec names no status for that refusal and
/// lists no 409 or 400 here, so it is the one client error it lists, 403, with a message saying
/// why; an unknown ID is 403 as well ([`forbidden`]).
pub(crate) fn delete_block(state: &mut State, id: &str) -> Result<Reply, ApiError> {
    let i = block_index(state, id)?;
    let block = &state.blocks[i];
    if let Some(a) = &block.assignment {
        return Err(ApiError::new(
            403,
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
            403,
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

/// `GET /networks/v1/public-networks[?location=PHX]` (networkapi.spec.yaml `publicNetworksGet`:
/// `location` "Supported values are `PHX`, `ASH`, `SGP`, `NLD`, `CHI`, `SEA` and `AUS`"; another
/// value is refused, 400, rather than answered with an empty list that looks like "none").
pub(crate) fn list_networks(state: &State, query: &str) -> Result<Reply, ApiError> {
    let location = query_param(query, "location");
    if let Some(l) = &location
        && !LOCATIONS.contains(&l.as_str())
    {
        return Err(ApiError::validation(vec![format!(
            "location: {l:?} must be one of {}",
            LOCATIONS.join(", ")
        )]));
    }
    Ok(Reply::Ok(
        state
            .networks
            .iter()
            .filter(|n| location.as_ref().is_none_or(|l| &n.location == l))
            .map(|n| render_network(state, n))
            .collect(),
    ))
}

/// `GET /networks/v1/public-networks/{id}` (networkapi.spec.yaml `publicNetworksNetworkIdGet`:
/// 200 `PublicNetwork`, whose `location` and `status` are required; 401, 403, 500). An unknown
/// ID is 403 ([`forbidden`]): the spec lists no 404 here.
pub(crate) fn get_network(state: &State, id: &str) -> Result<Reply, ApiError> {
    state
        .network(id)
        .map(|n| Reply::Ok(render_network(state, n)))
        .ok_or_else(|| forbidden("Public Network", id))
}

/// `POST /networks/v1/public-networks/{id}/ip-blocks` `{"id": block}` (networkapi.spec.yaml
/// `publicNetworksNetworkIdIpBlocksPost`: 202 `PublicNetworkIpBlock`; 400, 401, 403, 409, 500):
/// starts `assigning`. An unknown network is 403 ([`forbidden`], no 404 listed); an unknown
/// block in the body is 400 (the request names what does not exist). 409 is the spec's
/// `Conflict`, "The resource is in an incompatible state": a network that is not `READY`
/// (`PublicNetwork.status`: `BUSY`, `READY`, `DELETING`, `ERROR`) and a block that is not
/// `unassigned`. A block in another location is 400: the spec names no error for it, but a
/// block cannot be routed to a VLAN in another location (review finding D1).
pub(crate) fn assign_block(
    state: &mut State,
    now: Instant,
    network_id: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    state.run_race();
    let network = state
        .network(network_id)
        .ok_or_else(|| forbidden("Public Network", network_id))?;
    let network_location = network.location.clone();
    let network_status = network.status.clone();
    let obj = object_body(body)?;
    let mut errors = Vec::new();
    let Some(block_id) = string_field(&obj, "id", "", true, &mut errors) else {
        return Err(ApiError::validation(errors));
    };
    let Some(i) = state.blocks.iter().position(|b| b.id == block_id) else {
        return Err(ApiError::validation(vec![format!(
            "id: IP Block {block_id} does not exist"
        )]));
    };
    if network_status != "READY" {
        return Err(ApiError::new(
            409,
            format!(
                "Public Network {network_id} is {network_status}; IP Blocks can only be added to a READY network."
            ),
        ));
    }
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

/// `DELETE /networks/v1/public-networks/{id}/ip-blocks/{block}`: starts `unassigning`. An
/// unknown network is 403 ([`forbidden`]); an unknown block, like a block not on the network,
/// is 400 (see below).
pub(crate) fn unassign_block(
    state: &mut State,
    now: Instant,
    network_id: &str,
    block_id: &str,
) -> Result<Reply, ApiError> {
    if state.network(network_id).is_none() {
        return Err(forbidden("Public Network", network_id));
    }
    let Some(i) = state.blocks.iter().position(|b| b.id == block_id) else {
        return Err(ApiError::new(
            400,
            format!("IP Block {block_id} is not assigned to public network {network_id}."),
        ));
    };
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

/// `GET /tag-manager/v1/tags/{id}` (tagapi.spec.yaml `tagsTagIdGet`: 200, 401, 403, 500): an
/// unknown ID is 403 ([`forbidden`]).
pub(crate) fn get_tag(state: &State, id: &str) -> Result<Reply, ApiError> {
    state
        .tags
        .iter()
        .find(|t| t.id == id)
        .map(|t| Reply::Ok(render_tag(state, t)))
        .ok_or_else(|| forbidden("Tag", id))
}

/// `POST /tag-manager/v1/tags` `{"name", "isBillingTag", "description"?}` (tagapi.spec.yaml
/// `TagCreate`: 201 `Tag`; 409 for a name that exists, review finding D4).
pub(crate) fn create_tag(state: &mut State, body: &[u8]) -> Result<Reply, ApiError> {
    let obj = object_body(body)?;
    let mut errors = Vec::new();
    let name = string_field(&obj, "name", "", true, &mut errors);
    // tagapi.spec.yaml `TagCreate.name`: the same rule as tag values.
    if let Some(n) = &name
        && !valid_tag_text(n)
    {
        errors.push(format!("name: {n:?} must be {TAG_TEXT_RULE}"));
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
            tag_filters("tag=cluster.a-b&x=1&tag=n.v.w&tag=ort.Z%C3%BCrich").expect("valid"),
            [
                ("cluster".to_string(), "a-b".to_string()),
                ("n".to_string(), "v.w".to_string()),
                ("ort".to_string(), "Zürich".to_string()),
            ]
        );
        for bad in ["tag=usage", "tag=.v", "tag="] {
            assert_eq!(tag_filters(bad).map_err(|e| e.status), Err(400), "{bad}");
        }
    }

    #[test]
    fn tag_text_is_the_prose_rule() {
        for ok in [
            "Zúrich_1-a",
            "Zürich",
            "ÿ",
            "ø",
            "Ελλάδα",
            "a",
            &"a".repeat(100),
        ] {
            assert!(valid_tag_text(ok), "{ok}");
        }
        for bad in ["", "a^b", "a.b", "a/b", "a b", "×", "a`", &"a".repeat(101)] {
            assert!(!valid_tag_text(bad), "{bad}");
        }
    }
}
