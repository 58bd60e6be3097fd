//! What a permission error (SQLSTATE 42501) means for ipamctl's role: the grant that is
//! missing, as the statement to run, so that `permission denied for schema ipamctl` does not
//! leave the operator guessing. The grants themselves are listed in `docs/src/postgresql.md` ("Roles and
//! grants"): `init` needs `CREATE` on the database (it creates the schema, which its role
//! then owns); every other command needs `USAGE` on the schema, the four DML privileges on
//! its tables and `USAGE` on its sequences.

/// The schema every object of ipamctl lives in.
const SCHEMA: &str = "ipamctl";

/// The grant that `message` (the server's `permission denied for …`, with its `detail`)
/// says `role` lacks, as one clause to append to the error; `None` if it names nothing
/// ipamctl knows.
pub(super) fn missing(message: &str, detail: Option<&str>, role: &str) -> Option<String> {
    let object = message.strip_prefix("permission denied for ")?;
    let (kind, name) = object.split_once(' ').unwrap_or((object, ""));
    let (owner, grant) = match kind {
        "database" if detail.is_some_and(|d| d.contains("CONNECT")) => (
            "database's",
            format!("GRANT CONNECT ON DATABASE {name} TO {role}"),
        ),
        // `init` creating (or finding) the schema.
        "database" => (
            "database's",
            format!(
                "GRANT CREATE ON DATABASE {name} TO {role} (`init` needs it to create the schema; other commands need only the schema's grants)"
            ),
        ),
        "schema" => (
            "schema's",
            format!("GRANT USAGE ON SCHEMA {SCHEMA} TO {role}"),
        ),
        "table" | "relation" => (
            "schema's",
            format!(
                "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}"
            ),
        ),
        "sequence" => (
            "schema's",
            format!("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {SCHEMA} TO {role}"),
        ),
        "function" => (
            "schema's",
            format!("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {SCHEMA} TO {role}"),
        ),
        _ => return None,
    };
    Some(format!(
        "the role `{role}` lacks a grant; as the {owner} owner run: {grant}"
    ))
}

/// The advice for "must be owner of …" (also 42501): a migration changes the schema's
/// objects, which only their owner may do.
pub(super) fn not_owner(message: &str, role: &str) -> Option<String> {
    message.starts_with("must be owner of ").then(|| {
        format!(
            "only the role that owns the {SCHEMA} schema (the one that ran `init` first) may upgrade it; run `init` as that role, not as `{role}`"
        )
    })
}

/// The user of a connection as [`super::conninfo::ConnInfo::describe`] shows it
/// (`… user=NAME …`), or `ROLE` when it is not shown.
pub(super) fn role_of(shown: &str) -> &str {
    shown
        .split(' ')
        .find_map(|kv| kv.strip_prefix("user="))
        .filter(|u| !u.is_empty() && !u.starts_with('<') && !u.starts_with('\''))
        .unwrap_or("ROLE")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_denial_names_its_grant() {
        let g = |m: &str| missing(m, None, "app").unwrap();
        assert!(
            g("permission denied for schema ipamctl")
                .ends_with("GRANT USAGE ON SCHEMA ipamctl TO app")
        );
        assert!(
            g("permission denied for table pools")
                .contains("ON ALL TABLES IN SCHEMA ipamctl TO app")
        );
        assert!(g("permission denied for sequence events_id_seq").contains("SEQUENCES"));
        assert!(
            g("permission denied for database ipam")
                .contains("GRANT CREATE ON DATABASE ipam TO app")
        );
        assert!(
            missing(
                "permission denied for database ipam",
                Some("User does not have CONNECT privilege."),
                "app"
            )
            .unwrap()
            .ends_with("GRANT CONNECT ON DATABASE ipam TO app")
        );
        assert_eq!(
            missing("permission denied to create role", None, "app"),
            None
        );
        assert_eq!(role_of("dbname=ipam host=/run port=5432 user=app"), "app");
        assert_eq!(role_of("dbname=ipam"), "ROLE");
    }
}
