//! `ipamctl list`: allocations, sorted by namespace (cluster first), pool, then address;
//! and the selectors `list`, `release` and `reconcile` share, validated into an
//! [`engine::list::Query`](crate::engine::list::Query).

use std::io::Write;

use crate::cli::output::{self, Held};
use crate::cli::{GlobalArgs, ListArgs, OutputFormat, Selectors};
use crate::engine::list::{self, Query};
use crate::engine::range_holder::{Holders, VpcHolder};
use crate::engine::warning::Warnings;
use crate::error::Result;
use crate::model::host_name;
use crate::model::mac::Mac;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{AllocationManifest, Metadata, Owner, OwnerKind};
use crate::store::Store;

/// The selectors, validated as a [`Query`] (exit 2 on a malformed one).
pub fn query(pool: Option<&str>, address: Option<&str>, select: &Selectors) -> Result<Query> {
    crate::engine::request::query(pool, address, &select_input(select))
}

/// The selectors as the engine takes them.
pub(super) fn select_input(select: &Selectors) -> crate::engine::request::SelectInput {
    crate::engine::request::SelectInput {
        kind: select.kind.clone(),
        owner: select.owner.clone(),
        uid: select.uid.clone(),
        within: select.within.clone(),
        labels: select.labels.clone(),
        tenant: select.tenant.clone(),
    }
}

/// The allocations `query` selects in the scopes of `-n` (see [`list::collect`]), with the
/// warnings about broken files printed, also when it fails.
pub fn collect(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    query: &Query,
) -> Result<Vec<AllocationManifest>> {
    let scopes = super::named_scopes(store, g)?;
    let mut warnings = Warnings::default();
    let found = list::collect(store, scopes.as_deref(), query, &mut warnings);
    output::warn(&warnings);
    found
}

pub fn run(
    store: &(dyn Store + Sync),
    g: &GlobalArgs,
    args: &ListArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let mut query = query(args.pool.as_deref(), args.address.as_deref(), &args.select)?;
    query.mac = args
        .mac
        .as_deref()
        .map(|m| super::flag("--mac", Mac::parse(m)))
        .transpose()?;
    query.host_name = args
        .host_name
        .as_deref()
        .map(|h| super::flag("--host-name", host_name::parse(h)))
        .transpose()?;
    if args.expired {
        query.lapsed_at = Some(store.clock()?);
    }
    if let Some(name) = &args.subnet {
        // A stored subnet is its pool and its prefix.
        let (pool, cidr) = super::subnet::pool_and_prefix(store, g, name)?;
        query.pool = Some(pool.name);
        query.within = Some(cidr);
    }
    let found = collect(store, g, &query)?;
    let prefixes = crate::engine::request::listed_prefix_claims(
        store,
        super::named_scopes(store, g)?.as_deref(),
        &query,
    )?;
    if !prefixes.is_empty() {
        let mut resolver = Holders::new(store);
        return show_with_prefixes(
            &found,
            &prefixes,
            &mut |held| match held {
                Held::Address(m) => vpc_of(&mut resolver, &m.spec.owner, None),
                Held::Prefix(c) => vpc_of(&mut resolver, &c.spec.owner, Some(c)),
            },
            g,
            out,
        );
    }
    let rendered = render(store, &found, g, out);
    // The process ends right after this command: freeing tens of thousands of manifests one
    // allocation at a time would only delay its exit (15-20 ms of `list -o json` at 50,000
    // allocations, timed phase by phase). An in-process caller leaks this one listing.
    std::mem::forget(found);
    rendered
}

/// Allocations and then prefix claims (a table of their own, with a `PREFIX` column); in
/// JSON and YAML one List of both kinds, the manifests as stored (a range's annotation names
/// its VPC, its owner's uid is the VPC's). In the table a VPC's range is shown as the VPC:
/// `vpc` names the VPC an object's owner stands for (here, or answered by a server:
/// [`crate::cli::remote`]), asked of every prefix claim and, only when the table needs it,
/// of the allocations.
pub(crate) fn show_with_prefixes(
    found: &[AllocationManifest],
    prefixes: &[PrefixClaimManifest],
    vpc: &mut dyn FnMut(Held<'_>) -> Result<Option<VpcHolder>>,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let vpcs = prefixes
        .iter()
        .map(|m| vpc(Held::Prefix(m)))
        .collect::<Result<Vec<_>>>()?;
    let items: Vec<Held> = found
        .iter()
        .map(Held::Address)
        .chain(prefixes.iter().map(Held::Prefix))
        .collect();
    if output::write_list(out, g.output, &items)? {
        return Ok(());
    }
    if !found.is_empty() {
        show(found, &mut |m| vpc(Held::Address(m)), g, out)?;
        output::write(out, "\n")?;
    }
    let rows = prefixes
        .iter()
        .zip(vpcs)
        .map(|(m, vpc)| {
            (
                &m.metadata,
                m.spec.pool.as_str(),
                m.spec.prefix.to_string(),
                &m.spec.owner,
                (None, None),
                vpc,
            )
        })
        .collect();
    held_table(rows, "PREFIX", g, out)
}

/// The VPC `owner` stands for, when it is a VPC router whose uid a VPC's pools carry
/// (crate::engine::range_holder); `None` for any other owner, shown as itself.
fn vpc_of(
    resolver: &mut Holders<'_>,
    owner: &Owner,
    claim: Option<&PrefixClaimManifest>,
) -> Result<Option<VpcHolder>> {
    if owner.kind() != OwnerKind::Vpc {
        return Ok(None);
    }
    Ok(resolver.of_owner(owner, claim)?.vpc)
}

/// The table of held addresses or prefixes: namespace, pool, `at` (the address or prefix),
/// owner (a VPC router's as its VPC, `VPC tenant-1/prod/a1`) and uid; `-o wide` adds the
/// MAC and the lease's `EXPIRES` (of addresses), the object's name and labels.
fn held_table(rows: Vec<HeldRow<'_>>, at: &str, g: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let wide = g.output == Some(OutputFormat::Wide);
    let macs = at == "ADDRESS";
    let rows = rows
        .into_iter()
        .map(|(meta, pool, held, owner, (mac, expires), vpc)| {
            let holder = match vpc {
                Some(v) => format!("VPC {}/{}", v.namespace, v.name),
                None => owner.to_string(),
            };
            let mut row = vec![
                output::or_dash(meta.namespace.as_ref()),
                pool.to_owned(),
                held,
                holder,
                output::or_dash(owner.uid()),
            ];
            if wide {
                if macs {
                    row.push(output::or_dash(mac.as_ref()));
                    row.push(output::or_dash(expires.as_ref()));
                }
                row.push(meta.name.clone());
                row.push(output::labels(&meta.labels));
            }
            row
        })
        .collect();
    let mut headers = vec!["NAMESPACE", "POOL", at, "OWNER", "UID"];
    if wide {
        if macs {
            headers.extend(["MAC", "EXPIRES"]);
        }
        headers.extend(["NAME", "LABELS"]);
    }
    output::write(out, &output::table(&headers, rows, &[], g.no_headers))
}

/// One row of [`held_table`]: metadata, pool, address or prefix, owner, (MAC, lease
/// expiry), VPC.
type HeldRow<'a> = (
    &'a Metadata,
    &'a str,
    String,
    &'a Owner,
    (Option<Mac>, Option<crate::model::Timestamp>),
    Option<VpcHolder>,
);

/// Allocations alone. In the table an address held by a VPC router (its uplink) is shown as
/// the VPC; the look-up is made only for such owners, so a listing of VMs' addresses costs
/// nothing more. JSON and YAML are the manifests as stored (the owner's uid is the VPC's).
fn render(
    store: &dyn Store,
    found: &[AllocationManifest],
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    let mut resolver = Holders::new(store);
    show(
        found,
        &mut |m| vpc_of(&mut resolver, &m.spec.owner, None),
        g,
        out,
    )
}

/// Prints allocations (here, or answered by a server: [`crate::cli::remote`]); `vpc` names
/// the VPC an allocation's owner stands for, asked only when the table needs it.
pub(crate) fn show(
    found: &[AllocationManifest],
    vpc: &mut dyn FnMut(&AllocationManifest) -> Result<Option<VpcHolder>>,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> Result<()> {
    if output::write_list(out, g.output, found)? {
        return Ok(());
    }
    if found.is_empty() {
        output::diagnostic("No allocations found.");
        return Ok(());
    }
    let vpcs = found.iter().map(vpc).collect::<Result<Vec<_>>>()?;
    let rows = found
        .iter()
        .zip(vpcs)
        .map(|(m, vpc)| {
            (
                &m.metadata,
                m.spec.pool.as_str(),
                m.spec.address.to_string(),
                &m.spec.owner,
                (m.spec.mac, m.spec.expires_at),
                vpc,
            )
        })
        .collect();
    held_table(rows, "ADDRESS", g, out)
}
