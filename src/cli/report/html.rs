//! `ipamctl report` as one self-contained HTML page: inline CSS and SVG, no script, nothing
//! fetched, for a wiki or a CI artifact. Renders the [`super::PoolReport`]s the data half of
//! the report computed; counts as the tables write them, exact values in tooltips.

use std::fmt::Write as _;

use crate::cli::report::{PoolReport, PoolStatus, PrefixesReport};
use crate::model::PoolManifest;
use crate::model::candidates::readable_count;

/// Escapes text for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A count as the tables write it, its exact value in a tooltip when that differs:
/// `<span title="18446744073709551612">2^64 - 4</span>`.
fn count(n: u128) -> String {
    match readable_count(n) {
        short if short == n.to_string() => short,
        short => format!(r#"<span title="{n}">{}</span>"#, escape(&short)),
    }
}

/// A name that must not wrap (at a hyphen or anywhere else).
fn name(text: &str) -> String {
    format!(r#"<span class="name">{}</span>"#, escape(text))
}

/// The page's style. Names, addresses and counts never wrap; the tables are compact enough
/// that the pools table of a dual-stack VPC fits a 1024-pixel window (`tests/report_html.rs`
/// measures it in Chromium); a wider table scrolls inside its box, never the page.
const STYLE: &str = "
body { font-family: system-ui, sans-serif; font-size: 15px; margin: 1em 1.25em; color: #24292e; }
h1 { font-size: 1.6em; margin: 0.3em 0; }
h2 { font-size: 1.3em; }
h3 { font-size: 1.05em; margin: 1em 0 0.3em; }
.scroll { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.3em 0 0.8em; font-size: 14px; }
th, td { border: 1px solid #d0d7de; padding: 0.2em 0.45em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.name, code { white-space: nowrap; }
section.pool { border-top: 2px solid #d0d7de; margin-top: 1.5em; padding-top: 0.3em; }
.map svg { max-width: 100%; height: auto; }
code { font-family: ui-monospace, monospace; font-size: 0.95em; }
p.note { color: #57606a; }
";

/// The report as one self-contained HTML page titled `title`.
pub fn page(title: &str, pools: &[PoolReport]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{STYLE}</style>
</head>
<body>
<h1>{title}</h1>
"#,
        title = escape(title)
    );
    let total: u64 = pools.iter().map(|p| p.status.usage.allocated).sum();
    let subnets: usize = pools.iter().map(|p| p.status.subnets.len()).sum();
    let _ = writeln!(
        h,
        r#"<p id="summary">{} pools, {subnets} subnets, {total} allocations.</p>"#,
        pools.len()
    );
    h.push_str("<div class=\"scroll\">\n<table id=\"pools\">\n<thead><tr><th>Namespace</th><th>Pool</th><th>Kind</th><th>CIDR</th><th>Zone</th><th>Candidates</th><th>Allocated</th><th>Free</th><th>Used</th></tr></thead>\n<tbody>\n");
    for p in pools {
        let m = &p.manifest;
        let u = &p.status.usage;
        // A supernet's row counts prefixes (its section says more).
        let (allocated, free, used) = match &p.status.prefixes {
            Some(s) => (
                format!("{} prefixes", s.claimed.len()),
                s.largest_free
                    .as_ref()
                    .map_or_else(|| "none".into(), |b| format!("<code>{b}</code>")),
                s.percent_claimed,
            ),
            None => (u.allocated.to_string(), count(u.free), u.percent_used),
        };
        let _ = writeln!(
            h,
            r##"<tr><td>{}</td><td><a href="#{}">{}</a></td><td>{}</td><td><code>{}</code></td><td>{}</td><td class="num">{}</td><td class="num">{allocated}</td><td class="num">{free}</td><td class="num">{used:.1}%</td></tr>"##,
            name(&crate::cli::output::or_dash(m.metadata.namespace.as_ref())),
            anchor(p),
            name(&m.metadata.name),
            m.spec.kind,
            m.spec.cidr,
            name(&crate::cli::output::or_dash(m.spec.zone.as_ref())),
            count(u.candidates),
        );
    }
    h.push_str("</tbody>\n</table>\n</div>\n");
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
    // A long namespace and name may go on two lines, between them and never inside either.
    let full = match &m.metadata.namespace {
        Some(ns) => format!("{}<wbr>{}", name(&format!("{ns}/")), name(&m.metadata.name)),
        None => name(&m.metadata.name),
    };
    let _ = writeln!(
        h,
        r#"<section class="pool" id="{}">
<h2>{} <code>{}</code></h2>"#,
        anchor(p),
        full,
        m.spec.cidr
    );
    if let Some(prefixes) = &p.status.prefixes {
        prefixes_section(h, m, prefixes);
        h.push_str("</section>\n");
        return;
    }
    let u = &p.status.usage;
    let _ = writeln!(
        h,
        r#"<p class="usage">{} candidates, {} allocated, {} free ({:.1}% used){}.</p>"#,
        count(u.candidates),
        u.allocated,
        count(u.free),
        u.percent_used,
        if u.off_candidates > 0 {
            format!(
                "; {} more allocations on addresses no claim is given (<code>ipamctl check</code> reports them)",
                u.off_candidates
            )
        } else {
            String::new()
        }
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
    subnets(h, p);
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
    h.push_str("</ul>\n");
    holders_table(h, &p.status);
    h.push_str("</section>\n");
}

/// A supernet's section: its claims and free space, its map by prefixes, and a table of
/// the claimed prefixes with their owners.
fn prefixes_section(h: &mut String, m: &PoolManifest, p: &PrefixesReport) {
    let free: Vec<String> = p
        .free_blocks
        .iter()
        .map(|b| format!("/{}: {}", b.length, count(b.count)))
        .collect();
    let _ = writeln!(
        h,
        r#"<p class="usage">A supernet: {} prefixes claimed ({:.1}% of its addresses); largest free block {}; free blocks {}.</p>"#,
        p.claimed.len(),
        p.percent_claimed,
        p.largest_free
            .as_ref()
            .map_or_else(|| "none".into(), |b| format!("<code>{b}</code>")),
        free.join(", ")
    );
    let claims: Vec<(ipnet::IpNet, String)> = p
        .claimed
        .iter()
        .filter_map(|c| Some((c.prefix.parse().ok()?, c.holder.clone())))
        .collect();
    let excluded: Vec<ipnet::IpNet> = m.spec.exclude.iter().map(|e| e.net()).collect();
    let map = crate::cli::map::supernet::text(&m.metadata.name, m.spec.cidr, &claims, &excluded);
    let _ = writeln!(h, "<pre class=\"map\">{}</pre>", escape(&map));
    h.push_str("<h3>Claimed prefixes</h3>\n");
    if p.claimed.is_empty() {
        h.push_str("<p class=\"prefixes note\">No prefixes claimed.</p>\n");
        return;
    }
    h.push_str("<table class=\"prefixes\">\n<thead><tr><th>Prefix</th><th>Holder</th></tr></thead>\n<tbody>\n");
    for c in &p.claimed {
        let _ = writeln!(
            h,
            r#"<tr{}><td><code>{}</code></td><td>{}</td></tr>"#,
            c.uid
                .as_ref()
                .map(|u| format!(r#" title="uid {}""#, escape(u)))
                .unwrap_or_default(),
            c.prefix,
            name(&c.holder)
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

/// A pool's stored subnets, with their usage, or a line saying it has none.
fn subnets(h: &mut String, p: &PoolReport) {
    h.push_str("<h3>Subnets</h3>\n");
    if p.status.subnets.is_empty() {
        h.push_str("<p class=\"subnets note\">No stored subnets.</p>\n");
        return;
    }
    h.push_str("<div class=\"scroll\">\n<table class=\"subnets\">\n<thead><tr><th>Subnet</th><th>CIDR</th><th>Gateway</th><th>Reserved</th><th>Candidates</th><th>Allocated</th><th>Free</th><th>Used</th></tr></thead>\n<tbody>\n");
    for s in &p.status.subnets {
        let spec = &s.manifest.spec;
        let reserved: Vec<String> = spec
            .reserved
            .iter()
            .map(|r| format!("<code>{r}</code>"))
            .collect();
        let u = &s.status.usage;
        let _ = writeln!(
            h,
            r#"<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{:.1}%</td></tr>"#,
            name(&s.manifest.metadata.name),
            spec.cidr,
            s.manifest.gateway(),
            if reserved.is_empty() {
                "-".into()
            } else {
                reserved.join(", ")
            },
            count(u.candidates),
            u.allocated,
            count(u.free),
            u.percent_used
        );
    }
    h.push_str("</tbody>\n</table>\n</div>\n");
}

/// A pool's largest holders, by name; when every holder holds as many, it says so first.
fn holders_table(h: &mut String, status: &PoolStatus) {
    h.push_str("<h3>Largest holders</h3>\n");
    if status.largest_holders.is_empty() {
        h.push_str("<p class=\"holders note\">No allocations.</p>\n");
        return;
    }
    if let Some(n) = status.every_holder_has {
        let _ = writeln!(
            h,
            r#"<p class="holders note">Every holder has {n} address{}: none is larger. The first {} of {} by name:</p>"#,
            if n == 1 { "" } else { "es" },
            status.largest_holders.len(),
            status.holders
        );
    }
    // The owners are a column of their own only when a holder has more than its name says.
    let several = status.largest_holders.iter().any(|h| h.owner_count > 1);
    let _ = writeln!(
        h,
        "<table class=\"holders\">\n<thead><tr><th>Holder</th>{}<th>Addresses</th></tr></thead>\n<tbody>",
        if several { "<th>Owners</th>" } else { "" }
    );
    for holder in &status.largest_holders {
        let mut owners: Vec<String> = holder.owners.iter().map(|o| name(o)).collect();
        if holder.owner_count > holder.owners.len() {
            owners.push(format!(
                "and {} more",
                holder.owner_count - holder.owners.len()
            ));
        }
        let _ = writeln!(
            h,
            r#"<tr{}><td>{}</td>{}<td class="num">{}</td></tr>"#,
            holder
                .uid
                .as_ref()
                .map(|u| format!(r#" title="uid {}""#, escape(u)))
                .unwrap_or_default(),
            name(&holder.holder),
            if several {
                format!("<td>{}</td>", owners.join(", "))
            } else {
                String::new()
            },
            holder.addresses
        );
    }
    h.push_str("</tbody>\n</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_escapes_what_it_shows() {
        assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
    }
}
