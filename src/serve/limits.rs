//! The limits on what a client can make the server spend, each a flag with a default, and
//! the server's own count of a document's claims, fields and aliases (async-graphql limits
//! depth and complexity; aliases multiply a mutation, so the claims are counted here,
//! before anything runs).

use std::time::Duration;

use async_graphql::parser::types::{ExecutableDocument, OperationType, Selection, SelectionSet};
use async_graphql::{Name, Variables};
use async_graphql_value::{ConstValue, Value};

/// The limits (`ipamctl serve --help` names each flag).
#[derive(Clone, Debug)]
pub struct Limits {
    /// `--max-body-bytes`: a request's body.
    pub body_bytes: usize,
    /// `--max-depth`: a query's depth.
    pub depth: usize,
    /// `--max-complexity`: a query's complexity (one per field).
    pub complexity: usize,
    /// `--max-fields`: the fields of a document, as written.
    pub fields: usize,
    /// `--max-aliases`: the aliases of a document.
    pub aliases: usize,
    /// `--max-claims`: `allocate` fields plus `allocateMany` items in one request.
    pub claims: usize,
    /// `--read-timeout`: to read a request's headers, and its body.
    pub read_timeout: Duration,
    /// `--max-in-flight`: requests being served at once.
    pub in_flight: usize,
    /// `--request-timeout`: one request's run time.
    pub request_time: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            body_bytes: 1 << 20,
            depth: 20,
            complexity: 5000,
            fields: 5000,
            aliases: 1000,
            claims: 1000,
            read_timeout: Duration::from_secs(10),
            in_flight: 256,
            request_time: Duration::from_secs(30),
        }
    }
}

/// How deep fragments may spread into each other while counting (a cycle is refused by
/// validation later; here it only has to end).
const SPREAD_DEPTH: usize = 16;

impl Limits {
    /// Checks `doc` (with its `variables`) against the claims, fields and aliases limits;
    /// the message names the flag of the one exceeded.
    pub fn check(&self, doc: &ExecutableDocument, variables: &Variables) -> Result<(), String> {
        let mut claims = 0;
        for (_, op) in doc.operations.iter() {
            if op.node.ty == OperationType::Mutation {
                claims += count_claims(
                    doc,
                    &op.node.selection_set.node,
                    variables,
                    0,
                    &mut Vec::new(),
                );
            }
        }
        if claims > self.claims {
            return Err(format!(
                "the request asks for {claims} claims, more than --max-claims {} (allocate fields and allocateMany inputs together)",
                self.claims
            ));
        }
        let (mut fields, mut aliases) = (0, 0);
        let sets = doc
            .operations
            .iter()
            .map(|(_, op)| &op.node.selection_set.node)
            .chain(doc.fragments.values().map(|f| &f.node.selection_set.node));
        for set in sets {
            count_fields(set, &mut fields, &mut aliases);
        }
        if fields > self.fields {
            return Err(format!(
                "the document has {fields} fields, more than --max-fields {}",
                self.fields
            ));
        }
        if aliases > self.aliases {
            return Err(format!(
                "the document has {aliases} aliases, more than --max-aliases {}",
                self.aliases
            ));
        }
        Ok(())
    }
}

/// The claims a mutation's selection set asks for: one per `allocate`, one per
/// `allocateMany` input; fragments counted where they are spread.
fn count_claims(
    doc: &ExecutableDocument,
    set: &SelectionSet,
    variables: &Variables,
    depth: usize,
    spread: &mut Vec<Name>,
) -> usize {
    if depth > SPREAD_DEPTH {
        return 0;
    }
    let mut n = 0;
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => match f.node.name.node.as_str() {
                "allocate" => n += 1,
                "allocateMany" => {
                    let inputs = f
                        .node
                        .arguments
                        .iter()
                        .find(|(name, _)| name.node == "inputs")
                        .map(|(_, v)| &v.node);
                    n += match inputs {
                        Some(Value::List(items)) => items.len(),
                        Some(Value::Variable(var)) => match variables.get(var) {
                            Some(ConstValue::List(items)) => items.len(),
                            _ => 1,
                        },
                        _ => 1,
                    };
                }
                _ => {}
            },
            Selection::InlineFragment(f) => {
                n += count_claims(
                    doc,
                    &f.node.selection_set.node,
                    variables,
                    depth + 1,
                    spread,
                );
            }
            Selection::FragmentSpread(s) => {
                let name = &s.node.fragment_name.node;
                if spread.contains(name) {
                    continue;
                }
                if let Some(fragment) = doc.fragments.get(name) {
                    spread.push(name.clone());
                    n += count_claims(
                        doc,
                        &fragment.node.selection_set.node,
                        variables,
                        depth + 1,
                        spread,
                    );
                    spread.pop();
                }
            }
        }
    }
    n
}

/// Adds the fields and aliases of `set` (and of the sets inside it), each as written.
fn count_fields(set: &SelectionSet, fields: &mut usize, aliases: &mut usize) {
    for item in &set.items {
        match &item.node {
            Selection::Field(f) => {
                *fields += 1;
                if let Some(alias) = &f.node.alias {
                    let _ = alias;
                    *aliases += 1;
                }
                count_fields(&f.node.selection_set.node, fields, aliases);
            }
            Selection::InlineFragment(f) => {
                count_fields(&f.node.selection_set.node, fields, aliases)
            }
            Selection::FragmentSpread(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(query: &str, variables: serde_json::Value, limits: &Limits) -> Result<(), String> {
        let doc = async_graphql::parser::parse_query(query).unwrap();
        limits.check(&doc, &Variables::from_json(variables))
    }

    #[test]
    fn aliased_allocates_and_allocate_many_items_count_together() {
        let limits = Limits {
            claims: 3,
            ..Limits::default()
        };
        let q = r#"mutation($v: [AllocateInput!]!) {
            a: allocate(input: {owner: "VM/a"}) { owner }
            ...F
            allocateMany(inputs: $v) { index }
        }
        fragment F on Mutation { b: allocate(input: {owner: "VM/b"}) { owner } }"#;
        let two = serde_json::json!({"v": [{"owner": "VM/c"}]});
        assert!(check(q, two, &limits).is_ok());
        let three = serde_json::json!({"v": [{"owner": "VM/c"}, {"owner": "VM/d"}]});
        let e = check(q, three, &limits).unwrap_err();
        assert!(e.contains("4 claims, more than --max-claims 3"), "{e}");
    }

    #[test]
    fn fields_and_aliases_are_counted_as_written() {
        let limits = Limits {
            aliases: 1,
            ..Limits::default()
        };
        let e = check(
            "{ a: pools { name } b: pools { name } }",
            serde_json::json!({}),
            &limits,
        )
        .unwrap_err();
        assert!(e.contains("2 aliases"), "{e}");
    }
}
