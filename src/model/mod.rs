//! Every value type of ipamctl and its validation: names, owners, addresses, pools,
//! allocations, subnets, cooldown records, the VPC naming rules, selectors and candidate
//! arithmetic. Pure: no I/O, and nothing of the crate but [`crate::error`].
//!
//! Every name is validated once, where it enters (a flag, a manifest); after that the code
//! passes the newtype around, never a bare `&str`.

pub mod address;
pub mod allocation;
pub mod candidates;
pub mod cooldown;
pub mod dhcp_options;
pub mod host_name;
pub mod kind;
pub mod layout;
pub mod lease;
pub mod mac;
pub mod manifest;
pub mod names;
pub mod owner;
pub mod pick;
pub mod pool;
pub mod prefix;
pub mod prefix_claim;
pub mod quota;
pub mod schema;
pub mod selector;
pub mod subnet;
pub mod suggest;
pub mod taken;
pub mod tenant;
pub mod time;
pub mod token;
pub mod vpc;

pub use address::*;
pub use allocation::*;
pub use kind::*;
pub use manifest::*;
pub use names::*;
pub use owner::*;
pub use pool::*;
pub use time::*;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn a_kind_filter_passes_every_owner_of_that_kind() {
        let vm = Owner::parse("VirtualMachine/web-01/0", None).unwrap();
        let fip = Owner::parse("FloatingIP/fip-1", None).unwrap();
        let kind = OwnerFilter::default()
            .with_kind(OwnerKind::VirtualMachine)
            .unwrap();
        assert!(kind.matches(&vm) && !kind.matches(&fip) && !kind.is_empty());
        let both = OwnerFilter::new(Some("FloatingIP/fip-1"), None).unwrap();
        assert!(
            both.clone()
                .with_kind(OwnerKind::FloatingIp)
                .unwrap()
                .matches(&fip)
        );
        assert!(both.with_kind(OwnerKind::Node).is_err());
    }

    #[test]
    fn labels_follow_rfc_1123() {
        assert!(PoolName::new("vpc-main").is_ok());
        assert!(PoolName::new("Vpc").is_err());
        assert!(PoolName::new("-a").is_err());
        assert!(PoolName::new(&"a".repeat(64)).is_err());
        assert!(PoolName::new(&"a".repeat(63)).is_ok());
        assert!(PoolName::new("a..b").is_err());
    }

    #[test]
    fn namespaces_are_slash_separated_labels() {
        assert!(Namespace::new("acme/prod").is_ok());
        assert!(Namespace::new("acme//prod").is_err());
        assert!(Namespace::new("/acme").is_err());
        assert!(Namespace::new("acme/..").is_err());
        assert!(Namespace::new("acme/ipallocations").is_err());
    }

    #[test]
    fn owner_names_follow_their_kind() {
        assert!(Owner::parse("VirtualMachine/web-01/0", None).is_ok());
        assert!(Owner::parse("VirtualMachine/web-01", None).is_err());
        assert!(Owner::parse("VirtualMachine/web-01/01", None).is_err());
        assert!(Owner::parse("VPC/router", None).is_ok());
        assert!(Owner::parse("VPC/edge", None).is_err());
        assert!(Owner::parse("Node/10.42.1.0/24", None).is_ok());
        assert!(Owner::parse("Node/10.42.1.1/24", None).is_err());
        assert!(Owner::parse("FloatingIP/fip-1", None).is_ok());
        assert!(Owner::parse("Pod/x", None).is_err());
    }

    #[test]
    fn allocation_names_round_trip() {
        let pool = PoolName::new("a-1-2-3-4").unwrap();
        let addr: IpAddr = "10.0.0.1".parse().unwrap();
        let name = allocation_name(&pool, addr);
        assert_eq!(parse_allocation_name(&name), Some(("a-1-2-3-4", addr)));
        assert_eq!(parse_allocation_name("x-10-0-0"), None);
        // Two-digit last octets end `-NN` like IPv6 groups' dashes: still IPv4.
        for addr in ["10.42.0.10", "10.0.0.99", "0.0.0.0", "255.255.255.255"] {
            let addr: IpAddr = addr.parse().unwrap();
            let name = allocation_name(&pool, addr);
            assert_eq!(
                parse_allocation_name(&name),
                Some(("a-1-2-3-4", addr)),
                "{name}"
            );
        }
        let long = PoolName::new("p-0000-0000-0000-0000-0000-0000-0000").unwrap();
        for addr in ["10.42.0.10", "2001:db8::1"] {
            let addr: IpAddr = addr.parse().unwrap();
            let name = allocation_name(&long, addr);
            assert_eq!(
                parse_allocation_name(&name),
                Some((long.as_str(), addr)),
                "{name}"
            );
        }
        assert_eq!(parse_allocation_name("x-10-0-0-256"), None);
        assert_eq!(parse_allocation_name("x-10-0-0-01"), None);
        assert_eq!(parse_allocation_name("-10-0-0-1"), None);
    }

    #[test]
    fn host_bits_suggest_the_prefix() {
        let err = parse_net("10.42.1.0/16").unwrap_err();
        assert!(err.contains("did you mean `10.42.0.0/16`"), "{err}");
        let err = parse_net("2001:db8::1/32").unwrap_err();
        assert!(err.contains("did you mean `2001:db8::/32`"), "{err}");
        assert!(parse_net("2001:db8::/032").is_err());
        assert_eq!(
            parse_net("2001:DB8::/32").unwrap().to_string(),
            "2001:db8::/32"
        );
    }

    #[test]
    fn ipv6_allocation_names_round_trip_and_refuse_every_other_form() {
        let pool = PoolName::new("vpc-main-v6").unwrap();
        for text in [
            "2001:db8::1",
            "::",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "fd00:42::abcd:1",
        ] {
            let addr: IpAddr = text.parse().unwrap();
            let name = allocation_name(&pool, addr);
            assert!(!name.contains(':') && !name.ends_with('-'), "{name}");
            assert_eq!(parse_allocation_name(&name), Some(("vpc-main-v6", addr)));
        }
        let good = "p-2001-0db8-0000-0000-0000-0000-0000-0001";
        assert!(parse_allocation_name(good).is_some());
        for bad in [
            "p-2001-db8-0-0-0-0-0-abcd",                  // compressed groups
            "p-2001-0DB8-0000-0000-0000-0000-0000-0001",  // uppercase
            "p-2001-0db8--1",                             // `::` as `--`
            "p-2001-0db8-0000-0000-0000-0000-0001",       // seven groups
            "-2001-0db8-0000-0000-0000-0000-0000-0001",   // no pool
            "2001-0db8-0000-0000-0000-0000-0000-0001",    // no pool at all
            "p-2001-0db8-0000-0000-0000-0000-0000-000g",  // not hex
            "p-2001-0db8-0000-0000-0000-0000-0000-00001", // five digits
            "p-2001-0db8-0000-0000-0000-0000-0000_0001",  // wrong separator
            "p-2001:0db8:0000:0000:0000:0000:0000:0001",  // colons
        ] {
            assert_eq!(parse_allocation_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn input_uids_are_uuids_kept_lowercase() {
        let upper = Uid::parse_uuid("3F2C8A9E-1B7D-4E0A-9C55-0D1E2F3A4B5C").unwrap();
        assert_eq!(upper.as_str(), "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c");
        assert!(upper.is_uuid());
        for bad in [
            "",
            "u-1",
            "web-01",
            "{3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5c}",
            "3f2c8a9e1b7d4e0a9c550d1e2f3a4b5c",
            "3f2c8a9e-1b7d-4e0a-9c55-0d1e2f3a4b5g",
        ] {
            let err = Uid::parse_uuid(bad).unwrap_err();
            assert!(
                err.contains(&format!("`{bad}`")) && !err.contains("$UID"),
                "{err}"
            );
        }
        assert!(Uid::parse_uuid("1000").unwrap_err().contains("`$UID`"));
    }

    #[test]
    fn owner_key_is_stable() {
        let owner = Owner::parse("VPC/router", Some(Uid::new("u-1").unwrap())).unwrap();
        assert!(!Uid::new("u-1").unwrap().is_uuid());
        // Pinned: a change here breaks lock and index agreement between versions.
        assert_eq!(owner.key(), owner.clone().key());
        assert_eq!(
            format!("{:016x}", owner.key()),
            format!("{:016x}", 0xb10a_290d_d809_7929_u64)
        );
    }

    /// A name is one identity per pool for every kind but `VPC`: its lock is the name's,
    /// whatever the uid, and the same bytes as an uid-less owner's key.
    #[test]
    fn an_owners_lock_is_its_names_except_a_vpcs() {
        let uid = |s: &str| Some(Uid::new(s).unwrap());
        let vm = |u| Owner::parse("VirtualMachine/vm-02/0", u).unwrap();
        let (bare, with_a, with_b) = (vm(None), vm(uid("a")), vm(uid("b")));
        assert_eq!(with_a.lock_key(), bare.lock_key());
        assert_eq!(with_a.lock_key(), with_b.lock_key());
        assert_eq!(bare.lock_key(), bare.key());
        assert!(with_a.is_namesake(&bare) && with_a.is_namesake(&with_b));
        assert!(!with_a.is_namesake(&with_a.clone()));
        let other = Owner::parse("VirtualMachine/vm-03/0", None).unwrap();
        assert!(!bare.is_namesake(&other));
        let router = |u| Owner::parse("VPC/router", u).unwrap();
        assert_ne!(router(uid("a")).lock_key(), router(uid("b")).lock_key());
        assert!(!router(uid("a")).is_namesake(&router(uid("b"))));
    }
}
