//! `/graphql` as the GraphQL-over-HTTP specification has it: `POST` with a JSON body
//! (`{query, variables, operationName, extensions}`), `GET` with the same as URL parameters
//! for queries only (a mutation over `GET` is 405); answers in
//! `application/graphql-response+json` when the client accepts it (request errors are then
//! 4xx), else `application/json` (200). Everything a client can make the server spend is
//! bounded here before the document runs: the body's size and the time to read it, the
//! requests in flight, the claims, fields and aliases of the document, its run time.

use std::time::Instant;

use async_graphql::Variables;
use async_graphql::parser::types::{DocumentOperations, ExecutableDocument, OperationType};
use axum::body::Body;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Value, json};

use super::http::{State, json as respond};

const GRAPHQL_RESPONSE: &str = "application/graphql-response+json; charset=utf-8";
const JSON: &str = "application/json; charset=utf-8";

/// What a request turned out to be, for the log and the metrics.
struct Told {
    token: String,
    operation: String,
    namespace: String,
    outcome: String,
}

/// Serves one `/graphql` request and logs it.
pub async fn handle(
    Extract(state): Extract<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let mut told = Told {
        token: "-".into(),
        operation: "-".into(),
        namespace: "-".into(),
        outcome: "OK".into(),
    };
    let response = match state.in_flight.try_acquire() {
        Ok(_permit) => serve(&state, &method, &uri, &headers, body, &mut told).await,
        Err(_) => {
            told.outcome = "LIMIT".into();
            let message = format!(
                "more than --max-in-flight {} requests at once; try again",
                state.limits.in_flight
            );
            failure(StatusCode::SERVICE_UNAVAILABLE, JSON, "LIMIT", 2, &message)
        }
    };
    let took = started.elapsed();
    state.stats.record(&told.operation, &told.outcome, took);
    super::log::request(
        state.log,
        &super::log::Line {
            token: &told.token,
            operation: &told.operation,
            namespace: &told.namespace,
            outcome: &told.outcome,
            status: response.status().as_u16(),
            duration: took,
        },
    );
    response
}

/// A response holding one error, with `code` and `exit` in its extensions.
fn failure(status: StatusCode, ty: &'static str, code: &str, exit: i32, message: &str) -> Response {
    let body =
        json!({"errors": [{"message": message, "extensions": {"code": code, "exit": exit}}]});
    respond(status, ty, &body)
}

/// A request that is not a GraphQL request at all (400 whatever the client accepts).
fn bad(ty: &'static str, message: &str, told: &mut Told) -> Response {
    told.outcome = "BAD_REQUEST".into();
    failure(StatusCode::BAD_REQUEST, ty, "BAD_REQUEST", 2, message)
}

// Length: the request's steps in the order the specification gives them, each a return.
async fn serve(
    state: &State,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
    told: &mut Told,
) -> Response {
    let Some(ty) = media_type(headers) else {
        told.outcome = "BAD_REQUEST".into();
        return failure(
            StatusCode::NOT_ACCEPTABLE,
            JSON,
            "BAD_REQUEST",
            2,
            "the client accepts neither application/graphql-response+json nor application/json",
        );
    };
    let params = if *method == Method::GET {
        match get_params(uri) {
            Ok(params) => params,
            Err(message) => return bad(ty, &message, told),
        }
    } else {
        if !is_json(headers) {
            told.outcome = "BAD_REQUEST".into();
            return failure(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ty,
                "BAD_REQUEST",
                2,
                "a POST's body is JSON: send `Content-Type: application/json`",
            );
        }
        let bytes = match read_body(state, headers, body).await {
            Ok(bytes) => bytes,
            Err((status, message)) => {
                told.outcome = "LIMIT".into();
                return failure(status, ty, "LIMIT", 2, &message);
            }
        };
        let Ok(text) = std::str::from_utf8(&bytes) else {
            return bad(ty, "the body is not UTF-8", told);
        };
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(params)) => params,
            Ok(Value::Array(_)) => {
                return bad(
                    ty,
                    "a batch of GraphQL requests (an array) is not served: send one object",
                    told,
                );
            }
            Ok(_) => return bad(ty, "the body is not a JSON object", told),
            Err(e) => return bad(ty, &format!("the body is not JSON: {e}"), told),
        }
    };
    let request = match Params::read(&params) {
        Ok(request) => request,
        Err(message) => return bad(ty, &message, told),
    };
    let caller = match super::http::caller(state, headers) {
        Ok(caller) => caller,
        Err(e) => {
            told.outcome = "UNAUTHENTICATED".into();
            let mut response = failure(
                StatusCode::UNAUTHORIZED,
                ty,
                "UNAUTHENTICATED",
                e.exit_code(),
                &e.to_string(),
            );
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return response;
        }
    };
    told.token = caller.name.clone();
    let request_error = |status_json: bool| {
        if ty == GRAPHQL_RESPONSE && !status_json {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        }
    };
    let doc = match async_graphql::parser::parse_query(&request.query) {
        Ok(doc) => doc,
        Err(e) => {
            told.outcome = "BAD_REQUEST".into();
            return failure(request_error(false), ty, "BAD_REQUEST", 2, &e.to_string());
        }
    };
    let operation = pick(&doc, request.operation_name.as_deref());
    if let Some((names, kind)) = &operation {
        told.operation = names.clone();
        told.namespace = namespace_of(&doc, request.operation_name.as_deref(), &request.variables)
            .unwrap_or_else(|| "-".into());
        if *method == Method::GET && *kind != OperationType::Query {
            told.outcome = "BAD_REQUEST".into();
            let mut response = failure(
                StatusCode::METHOD_NOT_ALLOWED,
                ty,
                "BAD_REQUEST",
                2,
                "a mutation is sent with POST, never GET",
            );
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static("POST"));
            return response;
        }
    }
    if let Err(message) = state.limits.check(&doc, &request.variables) {
        told.outcome = "LIMIT".into();
        return failure(request_error(false), ty, "LIMIT", 2, &message);
    }
    let mut gql = async_graphql::Request::new(request.query).variables(request.variables);
    // The document parsed above is the one that runs: parsing it twice cost every request
    // a second parse.
    gql.set_parsed_query(doc);
    if let Some(name) = request.operation_name {
        gql = gql.operation_name(name);
    }
    gql = gql.data(caller);
    let run = state.schema.execute(gql);
    let response = match tokio::time::timeout(state.limits.request_time, run).await {
        Ok(response) => response,
        Err(_) => {
            told.outcome = "LIMIT".into();
            let message = format!(
                "the request ran longer than --request-timeout {}; a claim in it may stand: ask again, which answers the same",
                humantime::format_duration(state.limits.request_time)
            );
            return failure(StatusCode::SERVICE_UNAVAILABLE, ty, "LIMIT", 2, &message);
        }
    };
    let first_code = response.errors.first().map(|e| {
        e.extensions
            .as_ref()
            .and_then(|x| x.get("code"))
            .and_then(|c| match c {
                async_graphql::Value::String(s) => Some(s.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "BAD_REQUEST".into())
    });
    if let Some(code) = &first_code {
        told.outcome = code.clone();
    }
    // No data and errors without a path: the document did not validate (a request error).
    let request_failed = response.data == async_graphql::Value::Null
        && !response.errors.is_empty()
        && response.errors.iter().all(|e| e.path.is_empty());
    let mut body = serde_json::to_value(&response).unwrap_or_else(|_| json!({}));
    if request_failed {
        if let Some(map) = body.as_object_mut() {
            map.remove("data");
        }
        if let Some(code) = add_bad_request_codes(&mut body) {
            told.outcome = code.into();
        }
    }
    respond(request_error(!request_failed), ty, &body)
}

/// async-graphql's messages for the limits it keeps (`--max-depth`, `--max-complexity`),
/// and the flag each names.
const ITS_LIMITS: [(&str, &str); 2] = [
    ("nested too deep", "--max-depth"),
    ("too complex", "--max-complexity"),
];

/// Gives every error without a code (async-graphql's own, of validation) `BAD_REQUEST`, or
/// `LIMIT` naming the flag for a limit it keeps.
fn add_bad_request_codes(body: &mut Value) -> Option<&'static str> {
    let errors = body.get_mut("errors").and_then(Value::as_array_mut)?;
    let mut first = None;
    for e in errors {
        let Some(e) = e.as_object_mut() else { continue };
        let message = e
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let limit = ITS_LIMITS.iter().find(|(m, _)| message.contains(m));
        if let Some((_, flag)) = limit {
            e.insert("message".into(), json!(format!("{message} (over {flag})")));
        }
        let code = if limit.is_some() {
            "LIMIT"
        } else {
            "BAD_REQUEST"
        };
        let ext = e.entry("extensions").or_insert_with(|| json!({}));
        if let Some(ext) = ext.as_object_mut() {
            ext.entry("code").or_insert(json!(code));
            ext.entry("exit").or_insert(json!(2));
        }
        first.get_or_insert(code);
    }
    first
}

/// The media type of the answer, from `Accept`: `None` when the client takes neither.
fn media_type(headers: &HeaderMap) -> Option<&'static str> {
    let Some(accept) = headers.get(header::ACCEPT) else {
        return Some(JSON);
    };
    let accept = accept.to_str().ok()?.to_ascii_lowercase();
    let types: Vec<&str> = accept
        .split(',')
        .map(|t| t.split(';').next().unwrap_or("").trim())
        .collect();
    if types.contains(&"application/graphql-response+json") {
        Some(GRAPHQL_RESPONSE)
    } else if types
        .iter()
        .any(|t| matches!(*t, "application/json" | "*/*" | "application/*" | ""))
    {
        Some(JSON)
    } else {
        None
    }
}

/// Whether the request's body says it is JSON.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .is_some_and(|t| t == "application/json" || t == "application/graphql-response+json")
}

/// The body, at most `--max-body-bytes` (413) read within `--read-timeout` (408).
async fn read_body(
    state: &State,
    headers: &HeaderMap,
    body: Body,
) -> Result<axum::body::Bytes, (StatusCode, String)> {
    let max = state.limits.body_bytes;
    let too_big = || {
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is larger than --max-body-bytes {max}"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let read = axum::body::to_bytes(body, max);
    match tokio::time::timeout(state.limits.read_timeout, read).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(too_big()),
        Err(_) => Err((
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body was not read within --read-timeout {}",
                humantime::format_duration(state.limits.read_timeout)
            ),
        )),
    }
}

/// A GET's parameters, as a POST's body would hold them (`variables` and `extensions`
/// are JSON text in the URL).
fn get_params(uri: &Uri) -> Result<serde_json::Map<String, Value>, String> {
    let query = uri.query().unwrap_or("");
    let pairs: Vec<(String, String)> =
        serde_urlencoded_pairs(query).ok_or("the URL's parameters are not URL-encoded UTF-8")?;
    let mut params = serde_json::Map::new();
    for (k, v) in pairs {
        let value = match k.as_str() {
            "variables" | "extensions" => {
                serde_json::from_str(&v).map_err(|e| format!("`{k}` is not JSON: {e}"))?
            }
            _ => Value::String(v),
        };
        params.insert(k, value);
    }
    Ok(params)
}

/// `a=b&c=d`, percent-decoded.
fn serde_urlencoded_pairs(query: &str) -> Option<Vec<(String, String)>> {
    let decode = |s: &str| -> Option<String> {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' => {
                    let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                    out.push(u8::from_str_radix(hex, 16).ok()?);
                    i += 2;
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8(out).ok()
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((decode(k)?, decode(v)?))
        })
        .collect()
}

/// The request's parameters, checked.
struct Params {
    query: String,
    variables: Variables,
    operation_name: Option<String>,
}

impl Params {
    fn read(params: &serde_json::Map<String, Value>) -> Result<Params, String> {
        let query = match params.get("query") {
            Some(Value::String(q)) => q.clone(),
            Some(_) => return Err("`query` is a string".into()),
            None => return Err("no `query`: send {\"query\": \"…\"}".into()),
        };
        let variables = match params.get("variables") {
            None | Some(Value::Null) => Variables::default(),
            Some(v @ Value::Object(_)) => Variables::from_json(v.clone()),
            Some(_) => return Err("`variables` is an object".into()),
        };
        let operation_name = match params.get("operationName") {
            None | Some(Value::Null) => None,
            Some(Value::String(n)) => Some(n.clone()),
            Some(_) => return Err("`operationName` is a string".into()),
        };
        match params.get("extensions") {
            None | Some(Value::Null | Value::Object(_)) => {}
            Some(_) => return Err("`extensions` is an object".into()),
        }
        Ok(Params {
            query,
            variables,
            operation_name,
        })
    }
}

/// The operation the request runs (its root fields' names, and its type), if the document
/// and `name` pick one.
fn pick(doc: &ExecutableDocument, name: Option<&str>) -> Option<(String, OperationType)> {
    let op = match (&doc.operations, name) {
        (DocumentOperations::Single(op), _) => op,
        (DocumentOperations::Multiple(ops), Some(name)) => {
            ops.iter().find(|(n, _)| n.as_str() == name)?.1
        }
        (DocumentOperations::Multiple(ops), None) if ops.len() == 1 => ops.values().next()?,
        _ => return None,
    };
    let names: Vec<&str> = op
        .node
        .selection_set
        .node
        .items
        .iter()
        .filter_map(|s| match &s.node {
            async_graphql::parser::types::Selection::Field(f) => Some(f.node.name.node.as_str()),
            _ => None,
        })
        .collect();
    let mut names: Vec<&str> = names
        .into_iter()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    names.truncate(8);
    Some((names.join(","), op.node.ty))
}

/// The namespace the operation's first root field names (`namespace`, or its input's), for
/// the log.
fn namespace_of(
    doc: &ExecutableDocument,
    name: Option<&str>,
    variables: &Variables,
) -> Option<String> {
    use async_graphql::Value as C;
    use async_graphql_value::Value as V;
    let op = doc
        .operations
        .iter()
        .find(|(n, _)| name.is_none() || n.map(|n| n.as_str()) == name)?
        .1;
    let resolve = |v: &V| -> Option<C> {
        match v {
            V::Variable(var) => variables.get(var).cloned(),
            other => other.clone().into_const(),
        }
    };
    for item in &op.node.selection_set.node.items {
        let async_graphql::parser::types::Selection::Field(f) = &item.node else {
            continue;
        };
        for (arg, value) in &f.node.arguments {
            let value = resolve(&value.node)?;
            let found = match (arg.node.as_str(), value) {
                ("namespace", C::String(ns)) => Some(ns),
                ("input", C::Object(fields)) => match fields.get("namespace") {
                    Some(C::String(ns)) => Some(ns.clone()),
                    _ => None,
                },
                _ => None,
            };
            if found.is_some() {
                return found;
            }
        }
    }
    None
}
