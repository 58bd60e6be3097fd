//! `ipamctl report`: every pool of a store with its usage, its map, its free ranges and its
//! largest holders, as data or as one self-contained HTML page (inline CSS and SVG, no
//! script, nothing fetched) for a wiki or a CI artifact. Pure: it takes what was read.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use serde::Serialize;

use crate::cli::map::{Map, drawable};
use crate::cli::output::Named;
use crate::model::candidates::{Candidates, Usage};
use crate::model::{AllocationManifest, PoolManifest};

/// How many holders a pool's entry names, largest first.
pub const TOP_HOLDERS: usize = 5;

/// How many free ranges a pool's entry names before it counts the rest.
pub const FREE_RANGES: usize = 12;

/// One holder: an owner uid (or, without one, the owner itself) and how many addresses it
/// holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Holder {
    /// `uid U` or `KIND/NAME`.
    pub holder: String,
    /// The owners (kind/name) holding them, as many as fit.
    pub owners: Vec<String>,
    /// How many addresses.
    pub addresses: usize,
}

/// A pool's entry.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolReport {
    /// The manifest.
    #[serde(flatten)]
    pub manifest: PoolManifest,
    /// What the report adds.
    pub status: PoolStatus,
    /// The map, when the pool is no larger than a map draws.
    #[serde(skip)]
    pub map: Option<Map>,
}

/// The `status` of a pool's entry.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// The usage figures.
    #[serde(flatten)]
    pub usage: Usage,
    /// The first free ranges.
    pub free_ranges: Vec<String>,
    /// How many more free ranges there are.
    pub more_free_ranges: usize,
    /// The largest holders, largest first.
    pub largest_holders: Vec<Holder>,
}

impl Named for PoolReport {
    fn resource(&self) -> String {
        self.manifest.resource()
    }
}

/// The entry of `pool`, whose allocations are `held`.
pub fn pool_report(pool: PoolManifest, held: &[AllocationManifest]) -> PoolReport {
    let taken: Vec<IpAddr> = held.iter().map(|m| m.spec.address).collect();
    let usage = Usage::of(&pool.spec, &taken);
    let candidates = Candidates::of_pool(&pool.spec);
    let mut free =
        candidates.format_spans(&candidates.clone().without(taken.iter().copied()).spans());
    let more_free_ranges = free.len().saturating_sub(FREE_RANGES);
    free.truncate(FREE_RANGES);
    let name = match &pool.metadata.namespace {
        Some(ns) => format!("{ns}/{}", pool.metadata.name),
        None => pool.metadata.name.clone(),
    };
    let map = drawable(pool.spec.cidr).then(|| {
        let map = Map::new(&name, &pool.spec, None, &taken);
        if map.per_address() {
            map.with_owners(
                held.iter()
                    .map(|m| (m.spec.address, m.spec.owner.with_uid())),
            )
        } else {
            map
        }
    });
    PoolReport {
        status: PoolStatus {
            usage,
            free_ranges: free,
            more_free_ranges,
            largest_holders: holders(held),
        },
        manifest: pool,
        map,
    }
}

/// The largest holders of `held`: by uid, or by owner where there is none.
fn holders(held: &[AllocationManifest]) -> Vec<Holder> {
    let mut by: BTreeMap<String, (Vec<String>, usize)> = BTreeMap::new();
    for m in held {
        let owner = &m.spec.owner;
        let key = match owner.uid() {
            Some(uid) => format!("uid {uid}"),
            None => owner.to_string(),
        };
        let entry = by.entry(key).or_default();
        let name = owner.to_string();
        if !entry.0.contains(&name) {
            entry.0.push(name);
        }
        entry.1 += 1;
    }
    let mut all: Vec<Holder> = by
        .into_iter()
        .map(|(holder, (mut owners, addresses))| {
            owners.sort();
            owners.truncate(4);
            Holder {
                holder,
                owners,
                addresses,
            }
        })
        .collect();
    all.sort_by(|a, b| b.addresses.cmp(&a.addresses).then(a.holder.cmp(&b.holder)));
    all.truncate(TOP_HOLDERS);
    all
}

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The report as one self-contained HTML page titled `title`.
pub fn html(title: &str, pools: &[PoolReport]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #24292e; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
th, td {{ border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: left; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
section.pool {{ border-top: 2px solid #d0d7de; margin-top: 2em; padding-top: 0.5em; }}
.map svg {{ max-width: 100%; height: auto; }}
code {{ font-family: ui-monospace, monospace; }}
</style>
</head>
<body>
<h1>{title}</h1>
"#,
        title = escape(title)
    );
    let total: u64 = pools.iter().map(|p| p.status.usage.allocated).sum();
    let _ = writeln!(
        h,
        r#"<p id="summary">{} pools, {total} allocations.</p>"#,
        pools.len()
    );
    h.push_str("<table id=\"pools\">\n<thead><tr><th>Namespace</th><th>Pool</th><th>Kind</th><th>CIDR</th><th>Zone</th><th>Candidates</th><th>Allocated</th><th>Free</th><th>Used</th></tr></thead>\n<tbody>\n");
    for p in pools {
        let m = &p.manifest;
        let u = &p.status.usage;
        let _ = writeln!(
            h,
            r##"<tr><td>{}</td><td><a href="#{}">{}</a></td><td>{}</td><td><code>{}</code></td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{:.1}%</td></tr>"##,
            escape(&crate::cli::output::or_dash(m.metadata.namespace.as_ref())),
            anchor(p),
            escape(&m.metadata.name),
            m.spec.kind,
            m.spec.cidr,
            escape(&crate::cli::output::or_dash(m.spec.zone.as_ref())),
            u.candidates,
            u.allocated,
            u.free,
            u.percent_used
        );
    }
    h.push_str("</tbody>\n</table>\n");
    for p in pools {
        section(&mut h, p);
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// The id of a pool's section.
fn anchor(p: &PoolReport) -> String {
    let m = &p.manifest;
    let scope = m
        .metadata
        .namespace
        .as_ref()
        .map_or_else(|| "cluster".to_owned(), |n| n.to_string().replace('/', "-"));
    format!("pool-{scope}-{}", m.metadata.name)
}

fn section(h: &mut String, p: &PoolReport) {
    let m = &p.manifest;
    let name = match &m.metadata.namespace {
        Some(ns) => format!("{ns}/{}", m.metadata.name),
        None => m.metadata.name.clone(),
    };
    let _ = writeln!(
        h,
        r#"<section class="pool" id="{}">
<h2>{} <code>{}</code></h2>"#,
        anchor(p),
        escape(&name),
        m.spec.cidr
    );
    let u = &p.status.usage;
    let _ = writeln!(
        h,
        r#"<p class="usage">{} candidates, {} allocated, {} free ({:.1}% used).</p>"#,
        u.candidates, u.allocated, u.free, u.percent_used
    );
    match &p.map {
        Some(map) => {
            let svg = map.svg();
            // Inline: the XML declaration has no place inside HTML.
            let svg = svg
                .split_once("?>\n")
                .map_or(svg.as_str(), |(_, rest)| rest);
            let _ = writeln!(h, "<div class=\"map\">\n{svg}</div>");
        }
        None => {
            let _ = writeln!(
                h,
                "<p class=\"no-map\">Too large to draw; <code>ipamctl pool show {} --map --within</code> a part of it.</p>",
                escape(&m.metadata.name)
            );
        }
    }
    h.push_str("<h3>Free ranges</h3>\n<ul class=\"free\">\n");
    for range in &p.status.free_ranges {
        let _ = writeln!(h, "<li><code>{range}</code></li>");
    }
    if p.status.free_ranges.is_empty() {
        h.push_str("<li>none</li>\n");
    }
    if p.status.more_free_ranges > 0 {
        let _ = writeln!(h, "<li>and {} more</li>", p.status.more_free_ranges);
    }
    h.push_str("</ul>\n<h3>Largest holders</h3>\n");
    if p.status.largest_holders.is_empty() {
        h.push_str("<p class=\"holders\">No allocations.</p>\n");
    } else {
        h.push_str("<table class=\"holders\">\n<thead><tr><th>Holder</th><th>Owners</th><th>Addresses</th></tr></thead>\n<tbody>\n");
        for holder in &p.status.largest_holders {
            let _ = writeln!(
                h,
                r#"<tr><td>{}</td><td>{}</td><td class="num">{}</td></tr>"#,
                escape(&holder.holder),
                escape(&holder.owners.join(", ")),
                holder.addresses
            );
        }
        h.push_str("</tbody>\n</table>\n");
    }
    h.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Owner, PoolName, Uid};

    fn held(pool: &PoolName, n: u8, owner: &str, uid: Option<&str>) -> AllocationManifest {
        let owner = Owner::parse(owner, uid.map(|u| Uid::new(u).unwrap())).unwrap();
        AllocationManifest::new(pool, None, IpAddr::from([10u8, 0, 0, n]), owner)
    }

    #[test]
    fn holders_are_counted_by_uid_largest_first() {
        let pool = PoolName::new("p").unwrap();
        let all = [
            held(&pool, 1, "VirtualMachine/web-01/0", Some("u1")),
            held(&pool, 2, "VirtualMachine/web-01/1", Some("u1")),
            held(&pool, 3, "FloatingIP/f", None),
            held(&pool, 4, "VirtualMachine/db/0", Some("u2")),
        ];
        let top = holders(&all);
        assert_eq!(top[0].holder, "uid u1");
        assert_eq!(top[0].addresses, 2);
        assert_eq!(
            top[0].owners,
            ["VirtualMachine/web-01/0", "VirtualMachine/web-01/1"]
        );
        assert_eq!(top.len(), 3);
    }

    #[test]
    fn html_escapes_what_it_shows() {
        assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
