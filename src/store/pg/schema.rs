//! The database schema: numbered migrations, applied by `ipamctl --store URL init` in one
//! transaction together with a row per version in `ipamctl.schema_version`, and the check
//! every other command makes before it reads or writes anything.
//!
//! Everything lives in the PostgreSQL schema `ipamctl`, so the tables can share a database
//! with other applications. Addresses are `inet`, so IPv6 pools need no table rewrite; the
//! cluster scope is the namespace `''` (a NULL would not take part in the keys).

/// The schema version this ipamctl writes and understands.
pub const LATEST: i32 = 13;

/// The migrations, in order: (version, SQL). Each is applied once, in the transaction that
/// records its version; never edit one that has shipped, add the next.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (1, V1),
    (2, V2),
    (3, V3),
    (4, V4),
    (5, V5),
    (6, V6),
    (7, V7),
    (8, V8),
    (9, V9),
    (10, V10),
    (11, V11),
    (12, V12),
    (13, V13),
];

/// The first schema: pools, allocations and their arbiters, the low-water hints, the scope
/// rows that `apply` locks, and the audit log.
const V1: &str = "
CREATE TABLE ipamctl.pools (
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    -- The manifest, byte for byte as the file store writes it.
    manifest    bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, name)
);

CREATE TABLE ipamctl.allocations (
    namespace   text        NOT NULL,
    pool        text        NOT NULL,
    address     inet        NOT NULL,
    owner_kind  text        NOT NULL,
    owner_name  text        NOT NULL,
    -- '' for an owner without a uid: a NULL would make every uid-less owner distinct.
    owner_uid   text        NOT NULL,
    manifest    bytea       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    -- The arbiters of every claim: one holder per address, one address per owner.
    PRIMARY KEY (namespace, pool, address),
    CONSTRAINT allocations_one_per_owner
        UNIQUE (namespace, pool, owner_kind, owner_name, owner_uid)
);
CREATE INDEX allocations_owner_uid ON ipamctl.allocations (owner_uid);

-- Where the lowest free address of a pool was last seen to start. Advice only: a claim
-- starts its gap query there, the insert still arbitrates, a release moves it down and
-- `epoch` changes with every release, so a claim never moves it past a freed address.
CREATE TABLE ipamctl.pool_hints (
    namespace   text        NOT NULL,
    pool        text        NOT NULL,
    low_water   inet,
    epoch       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, pool)
);

-- One row per scope, locked by `apply` and `vpc create` while they check overlaps.
CREATE TABLE ipamctl.scope_locks (
    namespace   text        PRIMARY KEY
);

-- Append-only audit of every change, written in the change's own transaction.
CREATE TABLE ipamctl.events (
    id          bigserial   PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    client      text        NOT NULL,
    action      text        NOT NULL CHECK (action IN
                    ('claimed', 'released', 'pool created', 'pool updated', 'pool deleted')),
    namespace   text        NOT NULL,
    kind        text        NOT NULL,
    name        text        NOT NULL,
    manifest    bytea       NOT NULL
);
CREATE INDEX events_at ON ipamctl.events (at);
";

/// Each pool's number of allocation rows, so `pool list` need not count a million rows: a
/// ledger of signed deltas, summed when read. Statement triggers on `allocations` append
/// one row per pool a statement changed (an `INSERT`, a `DELETE` or a `COPY`, by ipamctl or
/// by hand), in that statement's transaction, so the sum is exact in every snapshot.
///
/// Insert-only on purpose: a single counter row per pool would be a hot row that every
/// claim locks from its insert to its commit, serialising concurrent claims on one pool
/// (the arbiters must stay the constraints). Writers fold a pool's rows into one now and
/// then ([`FOLD`]), skipping rows another fold holds, so the ledger stays short and no
/// fold waits for another.
const V2: &str = "
CREATE TABLE ipamctl.pool_counts (
    namespace   text        NOT NULL,
    pool        text        NOT NULL,
    delta       bigint      NOT NULL
);
CREATE INDEX pool_counts_pool ON ipamctl.pool_counts (namespace, pool);
INSERT INTO ipamctl.pool_counts (namespace, pool, delta)
    SELECT namespace, pool, count(*) FROM ipamctl.allocations GROUP BY namespace, pool;

CREATE FUNCTION ipamctl.count_allocations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM ipamctl.pool_counts;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO ipamctl.pool_counts (namespace, pool, delta)
            SELECT namespace, pool, count(*) FROM changed GROUP BY namespace, pool;
    ELSE
        INSERT INTO ipamctl.pool_counts (namespace, pool, delta)
            SELECT namespace, pool, -count(*) FROM changed GROUP BY namespace, pool;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER allocations_counted_insert AFTER INSERT ON ipamctl.allocations
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION ipamctl.count_allocations();
CREATE TRIGGER allocations_counted_delete AFTER DELETE ON ipamctl.allocations
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION ipamctl.count_allocations();
CREATE TRIGGER allocations_counted_truncate AFTER TRUNCATE ON ipamctl.allocations
    FOR EACH STATEMENT EXECUTE FUNCTION ipamctl.count_allocations();
";

/// Folds a pool's ledger rows ($1, $2) into one. Rows another fold has locked are skipped
/// (`SKIP LOCKED`), so two folds never wait for each other or deadlock; each row is deleted
/// by exactly one fold, which adds its value back in the same statement, so the sum that
/// any snapshot sees is unchanged.
pub const FOLD: &str = "
WITH folded AS (
    DELETE FROM ipamctl.pool_counts
    WHERE ctid = ANY (ARRAY(SELECT ctid FROM ipamctl.pool_counts
                            WHERE namespace = $1 AND pool = $2
                            FOR UPDATE SKIP LOCKED))
    RETURNING delta
)
INSERT INTO ipamctl.pool_counts (namespace, pool, delta)
    SELECT $1, $2, sum(delta) FROM folded HAVING sum(delta) <> 0
";

/// Allocations record their `metadata.creationTimestamp` (written by the claim) in a column
/// of their own, so that `reconcile` can tell a claim made after its live list was taken
/// without parsing manifests. The manifest keeps it too, byte for byte, so `export` is
/// unchanged; rows claimed before this version, like files written by older versions, have
/// none (NULL).
const V3: &str = "
ALTER TABLE ipamctl.allocations ADD COLUMN creation_timestamp timestamptz;
";

/// Subnets and cooldown records: few per pool, each read whole, so one table keyed like the
/// file store's paths. Their arbiters are the pool row's locks (`FOR UPDATE` by subnet
/// changes and by a release that writes a record, `FOR SHARE` by claims), as in the file
/// store.
const V4: &str = "
CREATE TABLE ipamctl.objects (
    -- 'Subnet' or 'CooldownRecord'.
    kind        text        NOT NULL,
    namespace   text        NOT NULL,
    name        text        NOT NULL,
    -- The pool it belongs to, so a pool's records are found without parsing every row.
    pool        text        NOT NULL,
    -- The manifest, byte for byte as the file store writes it.
    manifest    bytea       NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);
CREATE INDEX objects_pool ON ipamctl.objects (kind, namespace, pool);
";

/// ipamctl's own claims and releases count themselves in the ledger, in the statement that
/// makes the change, in a transaction that says so (`ipamctl.counting = 'self'`, see
/// `BEGIN` in `mod.rs`); the triggers count every other writer's changes as before. The
/// `WHEN` is evaluated without calling the function, so ipamctl's statements never load
/// PL/pgSQL. An ipamctl older than this version refuses the schema, so none writes without
/// counting.
const V5: &str = "
DROP TRIGGER allocations_counted_insert ON ipamctl.allocations;
DROP TRIGGER allocations_counted_delete ON ipamctl.allocations;
CREATE TRIGGER allocations_counted_insert AFTER INSERT ON ipamctl.allocations
    REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT
    WHEN (current_setting('ipamctl.counting', true) IS DISTINCT FROM 'self')
    EXECUTE FUNCTION ipamctl.count_allocations();
CREATE TRIGGER allocations_counted_delete AFTER DELETE ON ipamctl.allocations
    REFERENCING OLD TABLE AS changed
    FOR EACH STATEMENT
    WHEN (current_setting('ipamctl.counting', true) IS DISTINCT FROM 'self')
    EXECUTE FUNCTION ipamctl.count_allocations();
";

/// The database defends what the file store's names defend, against hand edits (psql,
/// `COPY`, other tools):
///
/// - an allocation's address is a host address (`masklen` 32 or 128): `10.9.0.2/26` would
///   be a second key for 10.9.0.2, and `address = $1` look-ups would miss it. `NOT VALID`,
///   so that `init` upgrades a database that already holds such a row; `ipamctl check`
///   reports it.
/// - a row's namespace, pool, address and owner columns agree with its manifest (the
///   manifest's canonical lines, as ipamctl writes them), checked by a row trigger on every
///   insert and update of another writer; ipamctl's own claims (which write both from one
///   manifest) skip it by the same `WHEN` as the ledger, so no ipamctl process loads
///   PL/pgSQL.
/// - the ledger counts an `UPDATE` that moves rows between pools as the delete and insert
///   it is.
const V6: &str = r#"
ALTER TABLE ipamctl.allocations ADD CONSTRAINT allocations_host_address
    CHECK (masklen(address) = CASE family(address) WHEN 4 THEN 32 ELSE 128 END) NOT VALID;

CREATE FUNCTION ipamctl.manifest_line(manifest bytea, pattern text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT btrim(substring(convert_from(manifest, 'UTF8') FROM pattern), '"''')
$$;

-- The columns an allocation row's manifest says, NULL where it does not say them in
-- ipamctl's canonical form.
CREATE FUNCTION ipamctl.manifest_columns(manifest bytea,
    OUT namespace text, OUT pool text, OUT address text,
    OUT owner_kind text, OUT owner_name text, OUT owner_uid text)
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(ipamctl.manifest_line(manifest, E'\nmetadata:\n(?:  [^\n]*\n|    [^\n]*\n)*?  namespace: ([^\n]*)\n'), ''),
           ipamctl.manifest_line(manifest, E'\nspec:\n  pool: ([^\n]*)\n'),
           ipamctl.manifest_line(manifest, E'\n  address: ([^\n]*)\n'),
           ipamctl.manifest_line(manifest, E'\n  owner:\n    kind: ([^\n]*)\n'),
           ipamctl.manifest_line(manifest, E'\n  owner:\n    kind: [^\n]*\n(?:    uid: [^\n]*\n)?    name: ([^\n]*)'),
           coalesce(ipamctl.manifest_line(manifest, E'\n  owner:\n    kind: [^\n]*\n    uid: ([^\n]*)\n'), '')
$$;

CREATE FUNCTION ipamctl.check_allocation_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    m record := ipamctl.manifest_columns(NEW.manifest);
BEGIN
    IF m.pool IS DISTINCT FROM NEW.pool
       OR m.address IS DISTINCT FROM host(NEW.address)
       OR m.owner_kind IS DISTINCT FROM NEW.owner_kind
       OR m.owner_name IS DISTINCT FROM NEW.owner_name
       OR m.owner_uid IS DISTINCT FROM NEW.owner_uid
       OR m.namespace IS DISTINCT FROM NEW.namespace THEN
        RAISE EXCEPTION 'ipamctl.allocations: the row (%, %, %, owner %/% uid %) disagrees with its manifest (%, %, %, owner %/% uid %)',
            NEW.namespace, NEW.pool, host(NEW.address), NEW.owner_kind, NEW.owner_name, NEW.owner_uid,
            m.namespace, m.pool, m.address, m.owner_kind, m.owner_name, m.owner_uid
            USING ERRCODE = 'check_violation',
                  HINT = 'an allocation''s columns are its manifest''s: release it and allocate again';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER allocations_agree_with_manifest BEFORE INSERT OR UPDATE ON ipamctl.allocations
    FOR EACH ROW
    WHEN (current_setting('ipamctl.counting', true) IS DISTINCT FROM 'self')
    EXECUTE FUNCTION ipamctl.check_allocation_row();

CREATE FUNCTION ipamctl.count_moved_allocations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ipamctl.pool_counts (namespace, pool, delta)
        SELECT namespace, pool, sum(delta) FROM (
            SELECT namespace, pool, -1 AS delta FROM old_rows
            UNION ALL SELECT namespace, pool, 1 FROM new_rows) moved
        GROUP BY namespace, pool HAVING sum(delta) <> 0;
    RETURN NULL;
END $$;
CREATE TRIGGER allocations_counted_update AFTER UPDATE ON ipamctl.allocations
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ipamctl.count_moved_allocations();
"#;

/// Prefix claims of supernet pools (`IPPrefixClaim`) live in `objects` with their prefix in
/// a column of its own, and the database arbitrates: an exclusion constraint refuses a row
/// whose prefix shares an address with another claim of the same pool (`&&` of `inet_ops`),
/// whatever the lengths; `btree_gist` (a trusted contrib extension since PostgreSQL 13)
/// gives the text columns their `=` in the same GiST index. A claim also holds its pool's
/// row `FOR UPDATE` (which decides the owner's single claim); the constraint holds against
/// every other writer (an import, a hand-made row), and an insert it refuses is the
/// `ON CONFLICT DO NOTHING` that makes the claim read and decide again.
const V7: &str = "
CREATE EXTENSION IF NOT EXISTS btree_gist;
ALTER TABLE ipamctl.objects ADD COLUMN prefix inet;
ALTER TABLE ipamctl.objects ADD CONSTRAINT objects_prefix_claims_disjoint
    EXCLUDE USING gist (namespace WITH =, pool WITH =, prefix inet_ops WITH &&)
    WHERE (kind = 'IPPrefixClaim');
";

/// What a prefix claim's owner look-up reads (`Queries::find_prefix_owner`), as indexes, so
/// that a supernet of 50,000 claims is not read row by row: the claims' prefixes (an
/// index-only scan), and each claim's owner name as its manifest's canonical lines spell it.
/// The name is derived from the manifest itself, so no writer can make it disagree; where
/// the lines are not in ipamctl's form (a hand-made row: quoted, commented, reordered) it is
/// NULL, and the look-up reads those rows too.
const V8: &str = r#"
CREATE FUNCTION ipamctl.claim_owner_name(manifest bytea) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT substring(encode(manifest, 'escape')
        FROM E'\n  owner:\n    kind: [^\n]*\n(?:    uid: [^\n]*\n)?    name: ([^[:space:]"''#]+)\n')
$$;
CREATE INDEX objects_prefix_claim_owners
    ON ipamctl.objects (namespace, pool, ipamctl.claim_owner_name(manifest))
    WHERE kind = 'IPPrefixClaim';
CREATE INDEX objects_prefix_claim_prefixes ON ipamctl.objects (namespace, pool, prefix)
    WHERE kind = 'IPPrefixClaim';
"#;

/// A supernet's free space, kept so that a best-fit claim reads two index entries instead of
/// every claim of the pool (`prefix_free.rs`): `prefix_free` holds the pool's maximal free
/// aligned blocks (the complement of its claims and excludes, as
/// `model::prefix::free_blocks` gives it), `prefix_free_pools` what they were computed from
/// (the pool's prefix and excludes) and at which outside-writes `epoch`. ipamctl's claims and
/// releases, which hold the pool's row `FOR UPDATE`, split and merge the blocks in their own
/// statements; every other writer of `objects` (psql, `COPY`, an `import`) bumps the one
/// `prefix_free_epoch` row (a statement trigger for writers that are not ipamctl, ipamctl's
/// own statement otherwise), which makes every pool's blocks stale: the next claim computes
/// them again from the claims, once. Advice, never the arbiter: the exclusion constraint of
/// migration 7 still decides every claim, and a claim it refuses also drops the pool's blocks.
const V9: &str = "
CREATE TABLE ipamctl.prefix_free (
    namespace   text    NOT NULL,
    pool        text    NOT NULL,
    block       cidr    NOT NULL,
    PRIMARY KEY (namespace, pool, block)
);
-- Best fit: the longest block no longer than the length asked for, lowest first.
CREATE INDEX prefix_free_best_fit ON ipamctl.prefix_free (namespace, pool, (-masklen(block)), block);
-- The largest block, lowest first (the exit-5 message).
CREATE INDEX prefix_free_largest ON ipamctl.prefix_free (namespace, pool, masklen(block), block);
CREATE TABLE ipamctl.prefix_free_pools (
    namespace   text    NOT NULL,
    pool        text    NOT NULL,
    cidr        cidr    NOT NULL,
    excludes    cidr[]  NOT NULL,
    epoch       bigint  NOT NULL,
    PRIMARY KEY (namespace, pool)
);
CREATE TABLE ipamctl.prefix_free_epoch (
    one         boolean PRIMARY KEY DEFAULT true CHECK (one),
    epoch       bigint  NOT NULL
);
INSERT INTO ipamctl.prefix_free_epoch (epoch) VALUES (0);
CREATE FUNCTION ipamctl.prefix_free_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ipamctl.prefix_free_epoch SET epoch = epoch + 1;
    RETURN NULL;
END $$;
CREATE TRIGGER objects_prefix_free_stale AFTER INSERT OR UPDATE OR DELETE ON ipamctl.objects
    FOR EACH STATEMENT
    WHEN (current_setting('ipamctl.counting', true) IS DISTINCT FROM 'self')
    EXECUTE FUNCTION ipamctl.prefix_free_stale();
CREATE TRIGGER objects_prefix_free_stale_truncate AFTER TRUNCATE ON ipamctl.objects
    FOR EACH STATEMENT EXECUTE FUNCTION ipamctl.prefix_free_stale();
";

/// A NIC's MAC (`spec.mac`) is held by at most one allocation of a pool: a unique index on
/// the MAC as the manifest's canonical line spells it (`  mac: '52:54:00:12:34:56'`,
/// lowercase, colons), derived from the manifest itself so that no writer can make a column
/// disagree with it, and the arbiter of every claim's `INSERT … ON CONFLICT DO NOTHING` as
/// the primary key is of its address. A MAC written by hand in another spelling
/// (upper case, `-`, quoted otherwise) is NULL here and escapes the index; `check --store`
/// reads every manifest and reports a MAC held twice whatever its spelling. A MAC changed
/// in place (`ipamctl mac set`) is logged as a `mac changed` event.
const V10: &str = r#"
CREATE FUNCTION ipamctl.allocation_mac(manifest bytea) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT substring(encode(manifest, 'escape')
        FROM E'\n  mac: [''"]?([0-9a-f]{2}(?::[0-9a-f]{2}){5})[''"]?\n')
$$;
CREATE UNIQUE INDEX allocations_one_per_mac
    ON ipamctl.allocations (namespace, pool, ipamctl.allocation_mac(manifest))
    WHERE ipamctl.allocation_mac(manifest) IS NOT NULL;
ALTER TABLE ipamctl.events DROP CONSTRAINT events_action_check;
ALTER TABLE ipamctl.events ADD CONSTRAINT events_action_check CHECK (action IN
    ('claimed', 'released', 'mac changed', 'pool created', 'pool updated', 'pool deleted'));
"#;

/// Prefix claims get the defences allocations have (migration 6), and the kept free blocks
/// an epoch no other role can switch off:
///
/// - a claim row's namespace, name, pool and prefix agree with its manifest (the manifest's
///   canonical lines), checked on every insert and update of another writer by a row
///   trigger whose `WHEN` does the comparison in SQL, so that only a disagreeing row loads
///   PL/pgSQL (to refuse it); `ipamctl check --store` reports rows made before this
///   version (or with the trigger disabled);
/// - ipamctl's own writes skip the stale-blocks trigger only when the transaction says so
///   *and* its role is (a member of) the owner of `ipamctl.objects`: a role with DML rights
///   alone that sets `ipamctl.counting = 'self'` still bumps the epoch, so every pool's
///   blocks are computed again. (`session_replication_role = replica` needs a superuser.)
///   An ipamctl that runs as such a role makes the blocks stale with each of its own claims
///   too: correct, at the cost of computing them again per claim.
const V11: &str = r#"
-- The manifest read as `encode(..., 'escape')` (as `claim_owner_name` does), so that a row
-- whose bytes are not UTF-8 disagrees (its lines are not found) instead of failing.
CREATE FUNCTION ipamctl.claim_line(manifest bytea, pattern text) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT btrim(substring(encode(manifest, 'escape') FROM pattern), '"''')
$$;

CREATE FUNCTION ipamctl.claim_columns(manifest bytea,
    OUT namespace text, OUT name text, OUT pool text, OUT prefix text)
    LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(ipamctl.claim_line(manifest, E'\nmetadata:\n(?:  [^\n]*\n|    [^\n]*\n)*?  namespace: ([^\n]*)\n'), ''),
           ipamctl.claim_line(manifest, E'\nmetadata:\n  name: ([^\n]*)\n'),
           ipamctl.claim_line(manifest, E'\nspec:\n  pool: ([^\n]*)\n'),
           ipamctl.claim_line(manifest, E'\nspec:\n  pool: [^\n]*\n  prefix: ([^\n]*)\n')
$$;

CREATE FUNCTION ipamctl.claim_row_disagrees(namespace text, name text, pool text, prefix inet,
    manifest bytea) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS $$
    SELECT m.namespace IS DISTINCT FROM $1 OR m.name IS DISTINCT FROM $2
        OR m.pool IS DISTINCT FROM $3 OR m.prefix IS DISTINCT FROM host($4) || '/' || masklen($4)
    FROM ipamctl.claim_columns($5) m
$$;

CREATE FUNCTION ipamctl.refuse_claim_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    m record := ipamctl.claim_columns(NEW.manifest);
BEGIN
    RAISE EXCEPTION 'ipamctl.objects: the prefix claim row (namespace %, name %, pool %, prefix %) disagrees with its manifest (namespace %, name %, pool %, prefix %)',
        NEW.namespace, NEW.name, NEW.pool, NEW.prefix, m.namespace, m.name, m.pool, m.prefix
        USING ERRCODE = 'check_violation',
              HINT = 'a prefix claim''s columns are its manifest''s: release it and claim again';
END $$;

CREATE TRIGGER objects_prefix_claims_agree BEFORE INSERT OR UPDATE ON ipamctl.objects
    FOR EACH ROW
    WHEN (NEW.kind = 'IPPrefixClaim'
          AND ipamctl.claim_row_disagrees(NEW.namespace, NEW.name, NEW.pool, NEW.prefix, NEW.manifest))
    EXECUTE FUNCTION ipamctl.refuse_claim_row();

CREATE FUNCTION ipamctl.own_write() RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT current_setting('ipamctl.counting', true) IS NOT DISTINCT FROM 'self'
       AND pg_has_role(current_user,
                       (SELECT relowner FROM pg_class WHERE oid = 'ipamctl.objects'::regclass),
                       'USAGE')
$$;

DROP TRIGGER objects_prefix_free_stale ON ipamctl.objects;
CREATE TRIGGER objects_prefix_free_stale AFTER INSERT OR UPDATE OR DELETE ON ipamctl.objects
    FOR EACH STATEMENT
    WHEN (NOT ipamctl.own_write())
    EXECUTE FUNCTION ipamctl.prefix_free_stale();
"#;

/// An owner's name is one identity per pool (`crate::engine::identity`): a unique index on
/// (namespace, pool, owner kind, name) for every kind but `VPC` (whose name is always
/// `router`; its uid tells VPCs apart), the arbiter of every claim's `INSERT … ON CONFLICT
/// DO NOTHING` besides the primary key and `allocations_one_per_owner`: of two requests for
/// one name under two uids (or one without), racing, one inserts, and the other reads the
/// row that beat it and is refused naming it. A database that already holds a name under
/// two identities in a pool (made before this version) is refused the migration, naming
/// the first such name: release all but one of its addresses with the ipamctl that made
/// them, then run `init` again.
const V12: &str = r#"
DO $$
DECLARE
    twice record;
BEGIN
    SELECT namespace, pool, owner_kind, owner_name,
           string_agg(host(address) || ' (' || CASE owner_uid WHEN '' THEN 'no uid'
                                                 ELSE 'uid ' || owner_uid END || ')',
                      ', ' ORDER BY address) AS held
      INTO twice
      FROM ipamctl.allocations
     WHERE owner_kind <> 'VPC'
     GROUP BY namespace, pool, owner_kind, owner_name
    HAVING count(*) > 1
     ORDER BY namespace, pool, owner_kind, owner_name
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'owner %/% is held under two identities in pool % (namespace ''%''): %; an owner''s name is one identity per pool: release all but one of them with the ipamctl that made them (ipamctl --store URL release POOL ADDRESS --owner KIND/NAME --uid UID), then run ipamctl --store URL init again; nothing was changed',
            twice.owner_kind, twice.owner_name, twice.pool, twice.namespace, twice.held
            USING ERRCODE = 'unique_violation';
    END IF;
END $$;
CREATE UNIQUE INDEX allocations_one_per_owner_name
    ON ipamctl.allocations (namespace, pool, owner_kind, owner_name)
    WHERE owner_kind <> 'VPC';
"#;

/// Leases (`spec.expiresAt`, `allocate --ttl`): the instant a claim lapses, read from the
/// manifest's canonical line (`  expiresAt: 2026-12-06T18:00:00Z`) so that no column can
/// disagree with it, for the reaper's one conditional `DELETE` (a lease is released only if
/// its row still lapses `grace` before the server's clock when the statement runs: a
/// renewal committed first, or waited for on its row lock, moved it on). A renewal rewrites
/// the manifest in place, logged as a `renewed` event.
const V13: &str = r#"
CREATE FUNCTION ipamctl.allocation_expires(manifest bytea) RETURNS timestamptz
    LANGUAGE sql STABLE AS $$
    SELECT substring(encode(manifest, 'escape')
        FROM E'\n  expiresAt: [''"]?([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z)[''"]?\n')::timestamptz
$$;
ALTER TABLE ipamctl.events DROP CONSTRAINT events_action_check;
ALTER TABLE ipamctl.events ADD CONSTRAINT events_action_check CHECK (action IN
    ('claimed', 'released', 'mac changed', 'renewed', 'pool created', 'pool updated',
     'pool deleted'));
"#;

/// Creates the schema's home and version table if missing (idempotent).
pub const BOOTSTRAP: &str = "
CREATE SCHEMA IF NOT EXISTS ipamctl;
CREATE TABLE IF NOT EXISTS ipamctl.schema_version (
    version     integer     PRIMARY KEY,
    applied_at  timestamptz NOT NULL DEFAULT now(),
    client      text        NOT NULL
);
";

/// The installed version: `None` when there is no schema (no `ipamctl` schema or version
/// table, or no version row).
pub const VERSION_QUERY: &str = "SELECT max(version) FROM ipamctl.schema_version";
