//! Child prefixes on PostgreSQL, driven through the real binary against a real server (see
//! `tests/pg/mod.rs`): the prefix a claim gets is the one the model's best-fit rule
//! (`ipamctl::model::prefix`) gives, whatever the database keeps of the free space
//! (migration 9), through random claims, exact claims, releases, cooldown records, hand
//! edits and changed excludes.

mod pg;

use std::collections::BTreeMap;

use ipamctl::model::prefix::{best_fit, free_blocks};
use ipnet::IpNet;
use pg::{Db, stderr, stdout};

/// A small deterministic generator (xorshift), so that a failure names its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn overlaps(a: IpNet, b: IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// A random aligned prefix of 10.0.0.0/24 of length `len`.
fn random_block(rng: &mut Rng, len: u8) -> IpNet {
    let size = 1u64 << (32 - len);
    let start = rng.below(256 / size) * size;
    IpNet::new(format!("10.0.0.{start}").parse().unwrap(), len).unwrap()
}

/// The supernet `sn` (10.0.0.0/24, /26 to /30, kept 1 h after a release) with `excludes`.
fn pool_yaml(excludes: &[IpNet]) -> String {
    let list: Vec<String> = excludes.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: sn\nspec:\n  cidr: \"10.0.0.0/24\"\n  kind: supernet\n  prefixLengths: {{min: 26, max: 30}}\n  reuseAfter: 1h\n  exclude: [{}]\n",
        list.join(", ")
    )
}

fn apply(db: &Db, yaml: &str) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pool.yaml");
    std::fs::write(&file, yaml).unwrap();
    db.run(["apply", "-f", file.to_str().unwrap()])
}

/// What the test knows of the pool: the model's view.
#[derive(Default)]
struct Model {
    excludes: Vec<IpNet>,
    /// Claimed prefixes by owner name (`FloatingIP/<name>`; `hand-*` made in psql).
    claims: BTreeMap<String, IpNet>,
    /// Cooldown records: the released prefix and the owner that released it.
    records: BTreeMap<IpNet, String>,
}

impl Model {
    fn taken_by_claims_and_excludes(&self) -> Vec<IpNet> {
        self.claims
            .values()
            .chain(&self.excludes)
            .copied()
            .collect()
    }

    /// What a best-fit claim of /`len` by `owner` (holding nothing) gets: its own released
    /// prefix first if it is of that length and free, else best fit outside claims,
    /// excludes and other owners' records; `None` for exit 5.
    fn expect(&self, owner: &str, len: u8) -> Option<IpNet> {
        let blocked: Vec<IpNet> = self
            .records
            .iter()
            .filter(|(_, o)| o.as_str() != owner)
            .map(|(p, _)| *p)
            .collect();
        let mut taken = self.taken_by_claims_and_excludes();
        let own = self
            .records
            .iter()
            .find(|(_, o)| o.as_str() == owner)
            .map(|(p, _)| *p);
        if let Some(own) = own
            && own.prefix_len() == len
            && !taken.iter().chain(&blocked).any(|t| overlaps(*t, own))
        {
            return Some(own);
        }
        taken.extend(blocked);
        best_fit(net("10.0.0.0/24"), &taken, len).ok()
    }

    /// Whether `prefix` overlaps a claim or an exclude.
    fn clashes(&self, prefix: IpNet) -> bool {
        self.taken_by_claims_and_excludes()
            .iter()
            .any(|t| overlaps(*t, prefix))
    }

    /// The claims (owner, prefix) of the owners that `pick` picks.
    fn claims_of(&self, pick: impl Fn(&str) -> bool) -> Vec<(String, IpNet)> {
        self.claims
            .iter()
            .filter(|(o, _)| pick(o))
            .map(|(o, p)| (o.clone(), *p))
            .collect()
    }

    /// After `owner` got `prefix`: its record goes if the prefix overlaps it.
    fn claimed(&mut self, owner: &str, prefix: IpNet) {
        self.records
            .retain(|p, o| !(o.as_str() == owner && overlaps(*p, prefix)));
        self.claims.insert(owner.to_owned(), prefix);
    }
}

/// The pool's kept free blocks, if the database says they are current and for the pool's
/// present excludes: then they must be the model's free blocks exactly.
fn check_kept(db: &Db, model: &Model, step: &str) {
    let mut c = db.sql();
    let state = c
        .query_opt(
            "SELECT s.excludes::text, s.epoch = e.epoch
             FROM ipamctl.prefix_free_pools s, ipamctl.prefix_free_epoch e
             WHERE s.namespace = '' AND s.pool = 'sn'",
            &[],
        )
        .unwrap();
    let Some(state) = state else { return };
    let mut excludes = model.excludes.clone();
    excludes.sort();
    excludes.dedup();
    let want: Vec<String> = excludes.iter().map(IpNet::to_string).collect();
    if !state.get::<_, bool>(1) || state.get::<_, String>(0) != format!("{{{}}}", want.join(",")) {
        return;
    }
    let kept: Vec<IpNet> = c
        .query(
            "SELECT text(block) FROM ipamctl.prefix_free
             WHERE namespace = '' AND pool = 'sn' ORDER BY block",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| net(r.get(0)))
        .collect();
    let mut free = free_blocks(net("10.0.0.0/24"), &model.taken_by_claims_and_excludes());
    free.sort();
    assert_eq!(kept, free, "{step}: the kept free blocks");
}

/// A claim row as another tool would insert it (`psql`), in ipamctl's canonical form.
fn insert_by_hand(db: &Db, owner: &str, prefix: IpNet) {
    let name = format!(
        "sn-{}-{}",
        prefix.network().to_string().replace('.', "-"),
        prefix.prefix_len()
    );
    let manifest = format!(
        "apiVersion: pivirt.hu/v1\nkind: IPPrefixClaim\nmetadata:\n  name: {name}\nspec:\n  pool: sn\n  prefix: {prefix}\n  owner:\n    kind: FloatingIP\n    name: {owner}\n"
    );
    db.sql()
        .execute(
            "INSERT INTO ipamctl.objects (kind, namespace, name, pool, manifest, prefix)
             VALUES ('IPPrefixClaim', '', $1, 'sn', $2, $3::text::inet)",
            &[&name, &manifest.as_bytes(), &prefix.to_string()],
        )
        .unwrap();
}

/// One random run of `steps` operations from `seed`.
fn run(seed: u64, steps: usize) {
    let db = Db::new();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut model = Model::default();
    for _ in 0..rng.below(4) {
        let len = 28 + rng.below(5) as u8;
        model.excludes.push(random_block(&mut rng, len));
    }
    let out = apply(&db, &pool_yaml(&model.excludes));
    assert!(out.status.success(), "seed {seed}: apply: {}", stderr(&out));
    let mut next = 0;
    for step in 0..steps {
        let at = format!("seed {seed}, step {step}");
        let roll = rng.below(100);
        // An owner that released a prefix and holds none: asks again (its own comes back
        // first if it asks for that length).
        let returning: Vec<String> = model
            .records
            .values()
            .filter(|o| !o.starts_with("hand-") && !model.claims.contains_key(*o))
            .cloned()
            .collect();
        if roll < 50 || (roll < 60 && returning.is_empty()) {
            let owner = format!("o{next}");
            next += 1;
            let len = 26 + rng.below(5) as u8;
            best_fit_claim(&db, &mut model, &owner, len, &at);
        } else if roll < 60 {
            let owner = returning[rng.below(returning.len() as u64) as usize].clone();
            let own = model.records.iter().find(|(_, o)| **o == owner).unwrap().0;
            let len = if rng.below(2) == 0 {
                own.prefix_len()
            } else {
                26 + rng.below(5) as u8
            };
            best_fit_claim(&db, &mut model, &owner, len, &at);
        } else if roll < 80 {
            // A release of a claim (never of one whose owner has a record: one record per
            // owner keeps "its own" unambiguous).
            let held = model.claims_of(|o| !model.records.values().any(|r| r == o));
            if held.is_empty() {
                continue;
            }
            let (owner, prefix) = held[rng.below(held.len() as u64) as usize].clone();
            let out = db.run(["release", "sn", &prefix.to_string(), "--force"]);
            assert!(out.status.success(), "{at}: release: {}", stderr(&out));
            model.claims.remove(&owner);
            model.records.insert(prefix, owner);
        } else if roll < 88 {
            let owner = format!("o{next}");
            next += 1;
            let len = 26 + rng.below(5) as u8;
            let want = random_block(&mut rng, len);
            let refused = model.clashes(want) || model.records.keys().any(|r| overlaps(*r, want));
            let out = db.run([
                "allocate",
                "sn",
                "--prefix",
                &want.to_string(),
                "--owner",
                &format!("FloatingIP/{owner}"),
            ]);
            let code = out.status.code();
            assert_eq!(
                code,
                Some(if refused { 4 } else { 0 }),
                "{at}: --prefix {want}: {}",
                stderr(&out)
            );
            if !refused {
                model.claimed(&owner, want);
            }
        } else if roll < 94 {
            // Another tool's claim or release, straight into the table.
            let hand = model.claims_of(|o| o.starts_with("hand-"));
            if rng.below(2) == 0 && !hand.is_empty() {
                let (owner, prefix) = hand[rng.below(hand.len() as u64) as usize].clone();
                db.sql()
                    .execute(
                        "DELETE FROM ipamctl.objects WHERE kind = 'IPPrefixClaim' AND prefix = $1::text::inet",
                        &[&prefix.to_string()],
                    )
                    .unwrap();
                model.claims.remove(&owner);
            } else {
                let want = random_block(&mut rng, 28);
                if model.clashes(want) {
                    continue;
                }
                let owner = format!("hand-{next}");
                next += 1;
                insert_by_hand(&db, &owner, want);
                model.claims.insert(owner, want);
            }
        } else {
            // `apply` with one more exclude, where no claim is.
            let want = random_block(&mut rng, 30);
            if model.clashes(want) {
                continue;
            }
            model.excludes.push(want);
            let out = apply(&db, &pool_yaml(&model.excludes));
            assert!(out.status.success(), "{at}: apply: {}", stderr(&out));
        }
        check_kept(&db, &model, &at);
    }
}

/// `allocate sn --prefix-length len` for `owner`, checked against the model.
fn best_fit_claim(db: &Db, model: &mut Model, owner: &str, len: u8, at: &str) {
    let expected = model.expect(owner, len);
    let out = db.run([
        "allocate",
        "sn",
        "--prefix-length",
        &len.to_string(),
        "--owner",
        &format!("FloatingIP/{owner}"),
    ]);
    match expected {
        Some(p) => {
            assert!(
                out.status.success(),
                "{at}: /{len} for {owner}: {}",
                stderr(&out)
            );
            assert_eq!(
                stdout(&out).trim(),
                p.to_string(),
                "{at}: /{len} for {owner}"
            );
            model.claimed(owner, p);
        }
        None => assert_eq!(
            out.status.code(),
            Some(5),
            "{at}: /{len} for {owner}: {}",
            stdout(&out)
        ),
    }
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn the_database_picks_the_prefix_the_models_best_fit_rule_picks() {
    for seed in 1..=4 {
        run(seed, 60);
    }
}
