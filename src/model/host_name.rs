//! The DNS host name of a NIC, derived from its owner: what a DHCP reservation hands the
//! guest and what the forward zone names. One RFC 1123 label, never mangled: an owner whose
//! name cannot give one is refused, naming it.

use crate::model::names::check_label;
use crate::model::owner::{Owner, OwnerKind};

/// The host name of `owner`'s NIC:
///
/// - `VirtualMachine web-01/0` is `web-01`, and NIC `n` > 0 of the same VM is `web-01-n`
///   (`web-01/1` is `web-01-1`), so a VM's first NIC carries its own name;
/// - `Node web` is `web` (a Node named by its prefix, `10.0.0.0/24`, has no host name);
/// - a `FloatingIP` or `VPC` has no NIC, so no host name.
///
/// The result is one lowercase RFC 1123 label of at most 63 characters; a VM whose host part
/// has dots (`web-01.lab/0`) is refused rather than cut. Two owners can derive one name
/// (`web-01/1` and `web-01-1/0`): the exports that name hosts refuse that, naming both.
///
/// # Examples
///
/// ```
/// use ipamctl::model::{Owner, host_name::host_name};
/// let nic = |s| Owner::parse(s, None).unwrap();
/// assert_eq!(host_name(&nic("VirtualMachine/web-01/0")).unwrap(), "web-01");
/// assert_eq!(host_name(&nic("VirtualMachine/web-01/2")).unwrap(), "web-01-2");
/// assert_eq!(host_name(&nic("Node/hv-3")).unwrap(), "hv-3");
/// assert!(host_name(&nic("VirtualMachine/web.lab/0")).is_err());
/// ```
pub fn host_name(owner: &Owner) -> Result<String, String> {
    let name = owner.name();
    let host = match owner.kind() {
        OwnerKind::VirtualMachine => {
            let (host, nic) = name
                .rsplit_once('/')
                .expect("a VirtualMachine name is `<hostname>/<nic index>`");
            if host.contains('.') {
                return Err(format!(
                    "`{owner}`: the host part `{host}` has dots; a host name here is one label (name the VM `{}`)",
                    host.split('.').next().unwrap_or(host)
                ));
            }
            match nic {
                "0" => host.to_owned(),
                _ => format!("{host}-{nic}"),
            }
        }
        OwnerKind::Node if name.contains('/') => {
            return Err(format!(
                "`{owner}` is named by its prefix and has no host name; name the Node by a label"
            ));
        }
        OwnerKind::Node => name.to_owned(),
        OwnerKind::FloatingIp | OwnerKind::Vpc => {
            return Err(format!(
                "`{owner}` has no NIC and so no host name (only VirtualMachine and Node do)"
            ));
        }
    };
    check_label(&host).map_err(|why| format!("`{owner}`: host name `{host}` {why}"))?;
    Ok(host)
}

/// A host name as a user types it (`list --host-name`): one RFC 1123 label, in any case
/// (DNS names are compared without it), given back lowercase as [`host_name`] derives them.
pub fn parse(s: &str) -> Result<String, String> {
    let name = s.to_ascii_lowercase();
    check_label(&name).map_err(|why| format!("host name `{s}` {why}"))?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(s: &str) -> Owner {
        Owner::parse(s, None).expect("a valid owner")
    }

    #[test]
    fn nic_zero_is_the_vm_and_later_nics_get_their_index() {
        assert_eq!(host_name(&owner("VirtualMachine/db/0")).unwrap(), "db");
        assert_eq!(host_name(&owner("VirtualMachine/db/12")).unwrap(), "db-12");
    }

    #[test]
    fn a_name_that_cannot_be_a_label_is_refused_not_cut() {
        let long = format!("VirtualMachine/{}/1", "a".repeat(62));
        let why = host_name(&owner(&long)).unwrap_err();
        assert!(why.contains("at most 63"), "{why}");
        assert!(host_name(&owner("Node/10.0.0.0/24")).is_err());
        assert!(host_name(&owner("FloatingIP/fip-1")).is_err());
    }
}
