//! Benchmark only: which layers of the owner look-up a process bypasses, to measure what
//! each one earns (`bench/owner-layers`). Read from `IPAMCTL_BENCH_SKIP` (a comma-separated
//! list of `hint`, `looked`, `index`, `view`, `watch`), here and nowhere else, and only in
//! a build with the `bench-layers` feature: without it every layer is always asked, and
//! this compiles to a constant. A bypassed layer is neither read nor written; the look-up
//! falls back to what the layer stands in front of (see [`super`]), so every answer stays
//! right, only slower or faster.

/// A layer of the owner look-up that a benchmark may bypass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(feature = "bench-layers"), allow(dead_code))]
pub(in crate::store::fs) enum Layer {
    Hint,
    Looked,
    Index,
    View,
    Watch,
}

/// Whether this process bypasses `layer` (always `false` without `bench-layers`).
#[cfg(not(feature = "bench-layers"))]
#[inline(always)]
pub(in crate::store::fs) const fn skipped(_layer: Layer) -> bool {
    false
}

/// Checks `IPAMCTL_BENCH_SKIP` when the store opens (nothing to check without
/// `bench-layers`).
#[cfg(not(feature = "bench-layers"))]
pub(in crate::store::fs) fn check() -> crate::error::Result<()> {
    Ok(())
}

/// Checks `IPAMCTL_BENCH_SKIP` when the store opens: a name that is no layer is exit 2
/// naming it, so that a misspelt variant is never timed as another.
#[cfg(feature = "bench-layers")]
pub(in crate::store::fs) fn check() -> crate::error::Result<()> {
    match layers() {
        Ok(_) => Ok(()),
        Err(name) => Err(crate::error::Error::Usage {
            message: format!(
                "IPAMCTL_BENCH_SKIP names `{}`, which is no layer",
                name.escape_debug()
            ),
            hint: Some("name some of hint, looked, index, view, watch, by commas".into()),
        }),
    }
}

/// The layers `IPAMCTL_BENCH_SKIP` names, or the first name that is none.
#[cfg(feature = "bench-layers")]
fn layers() -> std::result::Result<Vec<Layer>, String> {
    let names = std::env::var("IPAMCTL_BENCH_SKIP").unwrap_or_default();
    names
        .split(',')
        .filter(|n| !n.is_empty())
        .map(|name| match name {
            "hint" => Ok(Layer::Hint),
            "looked" => Ok(Layer::Looked),
            "index" => Ok(Layer::Index),
            "view" => Ok(Layer::View),
            "watch" => Ok(Layer::Watch),
            other => Err(other.to_owned()),
        })
        .collect()
}

/// Whether this process bypasses `layer`: named in `IPAMCTL_BENCH_SKIP` (which
/// [`check`] vouched for when the store opened).
#[cfg(feature = "bench-layers")]
pub(in crate::store::fs) fn skipped(layer: Layer) -> bool {
    static SKIP: std::sync::OnceLock<Vec<Layer>> = std::sync::OnceLock::new();
    SKIP.get_or_init(|| layers().unwrap_or_default())
        .contains(&layer)
}
