//! A supernet's prefixes and the prefix claims as a server answers them (`Supernet`,
//! `PrefixClaim`), made again the engine's values the local printers take: the supernet's
//! [`Usage`], each claim's manifest as stored and the VPC whose range it is.

use serde_json::Value;

use super::documents::{bad_answer, texts};
use crate::engine::prefix::Usage;
use crate::engine::range_holder::VpcHolder;
use crate::error::Result;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::{Namespace, Owner};

/// A `Supernet` as the engine's [`Usage`].
pub fn usage(url: &str, s: &Value) -> Result<Usage> {
    let net = |t: &str| -> Result<ipnet::IpNet> {
        t.parse()
            .map_err(|_| bad_answer(url, &format!("`{t}` is not a prefix")))
    };
    let claimed = texts(&s["claimed"])
        .iter()
        .map(|t| net(t))
        .collect::<Result<_>>()?;
    let largest = s["largestFree"].as_str().map(net).transpose()?;
    let free = s["freeBlocks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            let length = b["length"].as_u64().and_then(|l| u8::try_from(l).ok());
            let count = b["count"].as_str().and_then(|c| c.parse::<u128>().ok());
            length
                .zip(count)
                .ok_or_else(|| bad_answer(url, "a free block without its length and count"))
        })
        .collect::<Result<_>>()?;
    Ok(Usage {
        claimed,
        largest,
        free,
    })
}

/// A list of `PrefixClaim`s (`manifest vpc`) as their manifests, each with the VPC whose
/// range it is.
pub fn claims(url: &str, list: &Value) -> Result<Vec<(PrefixClaimManifest, Option<VpcHolder>)>> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let text = super::documents::manifest(url, c)?;
            let m = crate::yaml::decode_prefix_claim(text).map_err(|e| bad_answer(url, &e))?;
            let vpc = c["vpc"]
                .as_str()
                .map(|v| vpc_holder(url, &m.spec.owner, v))
                .transpose()?;
            Ok((m, vpc))
        })
        .collect()
}

/// The VPC `NAMESPACE/NAME` that `owner`, a VPC's router, stands for: its uid is the
/// router's.
pub fn vpc_holder(url: &str, owner: &Owner, vpc: &str) -> Result<VpcHolder> {
    // A namespace may hold `/` (`acme/dev`), a VPC's name never does.
    let (ns, name) = vpc
        .rsplit_once('/')
        .ok_or_else(|| bad_answer(url, "a VPC that is not NAMESPACE/NAME"))?;
    Ok(VpcHolder {
        namespace: Namespace::new(ns).map_err(|e| bad_answer(url, &e))?,
        name: name.to_owned(),
        uid: owner
            .uid()
            .cloned()
            .ok_or_else(|| bad_answer(url, "a VPC router without its uid"))?,
    })
}
