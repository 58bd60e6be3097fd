//! The GraphQL documents a `--server` command sends, each with its values in variables
//! (never written into the document), the variables made from the engine's own inputs
//! (the ones the local command validates first), and a GraphQL answer made a result: its
//! first error becomes [`Error::Answered`], carrying the server's `code`, `exit`, message
//! and hint (its `notes`, the lines the command line prints before the error, are printed).

use serde_json::{Map, Value, json};

use super::transport::{Answer, Client};
use crate::engine::admin::Deletion;
use crate::engine::allocate::Allocated;
use crate::engine::request::{AllocateInput, ReleaseInput};
use crate::error::{Error, Result, exit};

/// A claim, with what it holds as stored (and with `$explain`, why that address).
pub const ALLOCATE: &str = "mutation Allocate($input: AllocateInput!, $explain: Boolean) {
  allocate(input: $input, explain: $explain) { owner addresses prefix action held { action manifest } notes }
}";

/// A batch's claims, one outcome each.
pub const ALLOCATE_MANY: &str = "mutation AllocateMany($inputs: [AllocateInput!]!) {
  allocateMany(inputs: $inputs) {
    index
    claim { owner addresses prefix action held { action manifest } notes }
    error { code exit message hint }
  }
}";

/// A release, answering what it released.
pub const RELEASE: &str = "mutation Release($input: ReleaseInput!) {
  releaseHeld(input: $input) { allocations prefixClaims note notes }
}";

/// `list`'s allocations and prefix claims, which the same selectors pick.
pub const ALLOCATIONS: &str = "query Allocations($namespace: String, $pool: String, $owner: String, $uid: String, $mac: String, $selectors: Selectors) {
  allocations(namespace: $namespace, pool: $pool, owner: $owner, uid: $uid, mac: $mac, selectors: $selectors) { manifest vpc }
  prefixClaims(namespace: $namespace, pool: $pool, owner: $owner, uid: $uid, mac: $mac, selectors: $selectors) { manifest vpc }
}";

/// `pool list`'s pools, a supernet's with its prefixes.
pub const POOLS: &str = "query Pools($namespace: String) {
  pools(namespace: $namespace) {
    manifest candidates allocated offCandidates free percentUsed
    supernet { claimed largestFree freeBlocks { length count } }
    supernetError { code exit message hint }
  }
}";

/// `pool show`'s pool, a supernet's with its prefixes and claims.
pub const POOL_SHOWN: &str =
    "query PoolShown($name: String!, $namespace: String, $within: String) {
  poolShown(name: $name, namespace: $namespace, within: $within) {
    manifest
    usage { candidates allocated offCandidates free percentUsed freeRanges }
    subnets { name cidr usage { candidates allocated offCandidates free percentUsed freeRanges } }
    supernet { claimed largestFree freeBlocks { length count } }
    claims { manifest vpc }
  }
}";

/// Sends `document` with `variables` and answers its `data`, or the first error the server
/// gave. `changes`: whether the document may change the state (see
/// [`Client::post_graphql`]).
pub fn run(client: &mut Client, document: &str, variables: Value, changes: bool) -> Result<Value> {
    let body = json!({"query": document, "variables": variables});
    let body = serde_json::to_vec(&body).expect("a JSON value serializes");
    let answer = client.post_graphql(body, changes)?;
    data(client.url(), &answer)
}

/// The `data` of an answer, or its first error.
fn data(url: &str, answer: &Answer) -> Result<Value> {
    let parsed: Option<Map<String, Value>> = serde_json::from_slice(&answer.body).ok();
    let Some(mut body) = parsed else {
        let text = String::from_utf8_lossy(&answer.body);
        let first = text.lines().next().unwrap_or("").trim();
        return Err(Error::Answered {
            code: "HTTP".into(),
            exit: exit::FAILURE,
            message: format!(
                "{url} answered HTTP {} without a GraphQL answer: {}",
                answer.status,
                crate::yaml::excerpted(first)
            ),
            hint: None,
        });
    };
    if let Some(first) = body
        .get("errors")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        // What the command line prints on stderr before this error (an exhausted pool's
        // `--explain` lines), printed here as it prints them.
        for note in texts(&first["extensions"]["notes"]) {
            crate::cli::output::diagnostic(&note);
        }
        return Err(answered(first));
    }
    Ok(body.remove("data").unwrap_or(Value::Null))
}

/// A `RequestError` (or a GraphQL error whose extensions carry the same) as an error.
pub fn answered(e: &Value) -> Error {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
    let ext = e.get("extensions").unwrap_or(e);
    Error::Answered {
        code: text(ext.get("code")).unwrap_or_else(|| "BAD_REQUEST".into()),
        exit: ext
            .get("exit")
            .and_then(Value::as_i64)
            .and_then(|x| i32::try_from(x).ok())
            .unwrap_or(exit::FAILURE),
        message: text(e.get("message")).unwrap_or_else(|| "the server gave no message".into()),
        hint: text(ext.get("hint")),
    }
}

/// The `AllocateInput` of a claim the command line (or a batch line) stands for.
pub fn allocate_input(input: &AllocateInput) -> Value {
    let mut v = Map::new();
    put(&mut v, "namespace", input.namespace.as_ref());
    if !input.pools.is_empty() {
        v.insert("pools".into(), json!(input.pools));
    }
    v.insert(
        "owner".into(),
        json!(input.owner.clone().unwrap_or_default()),
    );
    put(&mut v, "uid", input.uid.as_ref());
    if !input.subnets.is_empty() {
        v.insert("subnets".into(), json!(input.subnets));
    }
    put(&mut v, "address", input.address.as_ref());
    put(&mut v, "within", input.within.as_ref());
    if !input.reserved.is_empty() {
        v.insert("reserved".into(), json!(input.reserved));
    }
    put(&mut v, "zone", input.zone.as_ref());
    put(&mut v, "tenant", input.tenant.as_ref());
    put(&mut v, "mac", input.mac.as_ref());
    put(&mut v, "prefixLength", input.prefix_length.as_ref());
    put(&mut v, "prefix", input.prefix.as_ref());
    put(&mut v, "ttl", input.ttl.as_ref());
    if input.dry_run {
        v.insert("dryRun".into(), json!(true));
    }
    Value::Object(v)
}

/// The `ReleaseInput` of a release.
pub fn release_input(input: &ReleaseInput) -> Result<Value> {
    let select = &input.select;
    let mut v = Map::new();
    put(&mut v, "namespace", input.namespace.as_ref());
    put(&mut v, "pool", input.pool.as_ref());
    put(&mut v, "address", input.address.as_ref());
    put(&mut v, "owner", select.owner.as_ref());
    put(&mut v, "uid", select.uid.as_ref());
    put(&mut v, "kind", select.kind.as_ref());
    put(&mut v, "tenant", select.tenant.as_ref());
    put(&mut v, "within", select.within.as_ref());
    put(&mut v, "labels", select.labels.as_ref());
    for (key, on) in [
        ("force", input.force),
        ("ignoreNotFound", input.ignore_not_found),
        ("dryRun", input.dry_run),
    ] {
        if on {
            v.insert(key.into(), json!(true));
        }
    }
    Ok(Value::Object(v))
}

fn put(v: &mut Map<String, Value>, key: &str, value: Option<&impl serde::Serialize>) {
    if let Some(value) = value {
        v.insert(key.into(), json!(value));
    }
}

/// An answer this client cannot read (another version's server, a proxy's page).
pub fn bad_answer(url: &str, why: &str) -> Error {
    Error::Answered {
        code: "BAD_ANSWER".into(),
        exit: crate::error::exit::FAILURE,
        message: format!("{url} answered what this ipamctl cannot read: {why}"),
        hint: Some("run an ipamctl of the server's version".into()),
    }
}

/// The strings of a JSON list (none for anything else).
pub(super) fn texts(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// An object's `manifest` in an answer.
pub(super) fn manifest<'a>(url: &str, held: &'a Value) -> Result<&'a str> {
    held["manifest"]
        .as_str()
        .ok_or_else(|| bad_answer(url, "an object without its manifest"))
}

/// A `Held` allocation as the engine's [`Allocated`].
pub(super) fn allocated(url: &str, held: &Value) -> Result<Allocated> {
    let m =
        crate::yaml::decode_allocation(manifest(url, held)?).map_err(|e| bad_answer(url, &e))?;
    Ok(match held["action"].as_str() {
        Some("CREATED") => Allocated::Created(m),
        Some("WOULD_CREATE") => Allocated::WouldCreate(m),
        _ => Allocated::Existing(m),
    })
}

/// An answer's object list under `key` (none for anything else), each made a `T`.
pub(super) fn each<T>(
    answer: &Value,
    key: &str,
    one: impl FnMut(&Value) -> Result<T>,
) -> Result<Vec<T>> {
    answer[key]
        .as_array()
        .into_iter()
        .flatten()
        .map(one)
        .collect()
}

/// A delete's target and flags: its name, namespace, `ignoreNotFound` and `dryRun`.
pub(super) type Target<'a> = (&'a str, Option<&'a str>, bool, bool);

/// Sends the delete `document` (its variables `$name`, `$namespace`, `$ignoreNotFound`
/// and `$dryRun`) and reads its answer under `key`: the not-found message of what did not
/// exist (`absent`, with `ignoreNotFound`), else what `deleted` makes of the answer.
pub(super) fn delete<T>(
    client: &mut Client,
    (document, key): (&str, &str),
    (name, namespace, ignore_not_found, dry_run): Target<'_>,
    deleted: impl FnOnce(&str, &Value) -> Result<T>,
) -> Result<Deletion<T>> {
    let variables = json!({
        "name": name,
        "namespace": namespace,
        "ignoreNotFound": ignore_not_found,
        "dryRun": dry_run,
    });
    let data = run(client, document, variables, !dry_run)?;
    let answer = &data[key];
    match answer["absent"].as_str() {
        Some(message) => Ok(Deletion::Absent(message.to_owned())),
        None => Ok(Deletion::Deleted(deleted(client.url(), answer)?)),
    }
}
