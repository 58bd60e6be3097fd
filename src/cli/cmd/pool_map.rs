//! `ipamctl pool show --map`: a pool's address map, as text or (`-o svg`) an SVG document,
//! drawn from what the engine gathers ([`crate::engine::pool::Drawn`]) here or through a
//! server ([`crate::cli::remote`]), by the same printer; and `pool show`'s `--within`.

use std::io::{IsTerminal, Write};
use std::net::IpAddr;

use super::pool_status::vpc_of;
use crate::cli::map::{self, Map};
use crate::cli::output;
use crate::cli::{FormatArg, GlobalArgs, PoolShowArgs};
use crate::engine::pool::{Drawn, Shown};
use crate::engine::scope::Scope;
use crate::engine::warning::Warnings;
use crate::error::{Error, Result};
use crate::model::{PoolKind, PoolManifest, PoolRef};
use crate::store::Store;

/// `pool show --map` of `shown`, read here.
pub(super) fn draw(
    store: &dyn Store,
    g: &GlobalArgs,
    args: &PoolShowArgs,
    pool: &PoolRef,
    shown: Shown,
    out: &mut dyn Write,
) -> Result<()> {
    refuse_format(g, pool)?;
    let manifest = &shown.manifest;
    if manifest.spec.kind == PoolKind::Supernet {
        let claims: Vec<(ipnet::IpNet, String)> = crate::engine::supernet::holders(store, pool)?
            .into_iter()
            .map(|(c, h)| (c.spec.prefix, h.display()))
            .collect();
        return draw_supernet(g, pool, manifest, &claims, out);
    }
    let within = view(args, pool, manifest)?;
    let drawn = shown.drawn(within);
    let view = within.unwrap_or(drawn.manifest.spec.cidr);
    let mut owners = || {
        let mut warnings = Warnings::default();
        let owners =
            crate::engine::pool::owners(store, &Scope::everything(), pool, view, &mut warnings);
        output::warn(&warnings);
        owners
    };
    print(g, args, pool, &drawn, within, &mut owners, out)
}

/// Exit 2 for `--map` with an output format it does not draw (json, yaml, name).
pub(crate) fn refuse_format(g: &GlobalArgs, pool: &PoolRef) -> Result<()> {
    let Some(format @ (FormatArg::Json | FormatArg::Yaml | FormatArg::Name)) = g.format else {
        return Ok(());
    };
    let name = match format {
        FormatArg::Json => "json",
        FormatArg::Yaml => "yaml",
        _ => "name",
    };
    Err(Error::Usage {
        message: format!("`--map` draws text or `-o svg`, not `-o {name}`"),
        hint: Some(format!(
            "drop `--map` for the pool's data: ipamctl pool show {}{}",
            pool.name,
            crate::engine::hint::namespace_flag(pool.namespace.as_ref())
        )),
    })
}

/// `--within` of an address pool's map, checked to lie inside the pool and to make a view
/// small enough to draw (exit 2 if not).
pub(crate) fn view(
    args: &PoolShowArgs,
    pool: &PoolRef,
    manifest: &PoolManifest,
) -> Result<Option<ipnet::IpNet>> {
    let within = within(args, pool, manifest)?;
    let view = within.unwrap_or(manifest.spec.cidr);
    if !map::drawable(view) {
        return Err(Error::Usage {
            message: format!(
                "{view} is too large to draw (the map goes up to a /{})",
                map::LARGEST_VIEW
            ),
            hint: Some(format!(
                "narrow it: ipamctl pool show {}{} --map --within {}",
                pool.name,
                crate::engine::hint::namespace_flag(pool.namespace.as_ref()),
                ipnet::IpNet::new(view.network(), 16)
                    .expect("16 is a valid prefix length")
                    .trunc()
            )),
        });
    }
    Ok(within)
}

/// `--within` of `pool show`, checked to lie inside the pool (exit 2 if not).
pub(crate) fn within(
    args: &PoolShowArgs,
    pool: &PoolRef,
    manifest: &PoolManifest,
) -> Result<Option<ipnet::IpNet>> {
    let cidr = manifest.spec.cidr;
    let within = args
        .within
        .as_deref()
        .map(|w| super::prefix("--within", w))
        .transpose()?;
    if let Some(w) = within
        && !cidr.contains(&w)
    {
        return Err(Error::invalid(
            "--within",
            format!("`{w}` does not lie inside pool `{pool}` ({cidr})"),
        ));
    }
    Ok(within)
}

/// Who holds each address of the view, asked for only by an SVG map of addresses.
pub(crate) type Owners<'a> = &'a mut dyn FnMut() -> Result<Vec<(IpAddr, String)>>;

/// Prints the map of `drawn` over `within` (checked by [`view`]), as text or (`-o svg`) an
/// SVG document whose cells name their holders (`owners`).
pub(crate) fn print(
    g: &GlobalArgs,
    args: &PoolShowArgs,
    pool: &PoolRef,
    drawn: &Drawn,
    within: Option<ipnet::IpNet>,
    owners: Owners<'_>,
    out: &mut dyn Write,
) -> Result<()> {
    let manifest = &drawn.manifest;
    let title = match vpc_of(pool, manifest) {
        Some(vpc) => format!("{pool} (VPC {vpc})"),
        None => pool.to_string(),
    };
    let map = Map::with_usage(
        &title,
        manifest,
        &drawn.subnets,
        within,
        &drawn.held,
        drawn.usage,
    );
    if g.format == Some(FormatArg::Svg) {
        let map = if map.per_address() {
            map.with_owners(owners()?)
        } else {
            map
        };
        return output::write(out, &map.svg());
    }
    let no_color = std::env::var_os("NO_COLOR");
    let colour = output::use_colour(
        args.color,
        std::io::stdout().is_terminal(),
        no_color.as_deref(),
    );
    output::write(out, &map.text(colour))
}

/// `pool show --map` of a supernet: drawn by its claimed prefixes ([`map::supernet`]), each
/// with its holder by name (`claims`), as text or (`-o svg`) an SVG document.
pub(crate) fn draw_supernet(
    g: &GlobalArgs,
    pool: &PoolRef,
    manifest: &PoolManifest,
    claims: &[(ipnet::IpNet, String)],
    out: &mut dyn Write,
) -> Result<()> {
    let excluded: Vec<ipnet::IpNet> = manifest.spec.exclude.iter().map(|e| e.net()).collect();
    let (title, cidr) = (pool.to_string(), manifest.spec.cidr);
    let drawn = if g.format == Some(FormatArg::Svg) {
        map::supernet::svg(&title, cidr, claims, &excluded)
    } else {
        map::supernet::text(&title, cidr, claims, &excluded)
    };
    output::write(out, &drawn)
}
