//! The command line of the host tier: `dhcp export` and `dns export`, which render what a
//! host deploys so that a guest learns the address it was given.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use clap_complete::ArgValueCompleter;

use crate::cli::complete;

/// `ipamctl dhcp ...`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum DhcpCommand {
    /// Print DHCP reservations for Kea or dnsmasq: one per allocation that has a MAC.
    ///
    /// `kea4` is a complete `{"Dhcp4": ...}` configuration (`kea-dhcp4 -t FILE` accepts it):
    /// one `subnet4` per stored subnet (per pool for a pool without subnets) with an
    /// explicit `id`, the gateway as its `routers` option, no dynamic pools, and
    /// `reservations` of `hw-address`, `ip-address` and `hostname`. `kea6` is the same as
    /// `{"Dhcp6": ...}` (`subnet6`, `ip-addresses`, reservations found by `hw-address`),
    /// each `subnet6` on the link `--interface` names (Kea selects a directly attached
    /// client's DHCPv6 subnet by it): without one only relayed clients are served (a
    /// warning), and several are exit 2.
    /// `dnsmasq` is a configuration file: a `dhcp-range=...,static` and the router per
    /// subnet (tagged by the subnet's id), and one `dhcp-host=MAC,ADDRESS[,[V6]],HOSTNAME`
    /// per NIC. The id of a subnet is a hash of its namespace, pool and name, the same on
    /// every run and untouched by changes to other subnets.
    ///
    /// A host name comes from the owner: `VirtualMachine web-01/0` is `web-01`, its NIC 1
    /// `web-01-1`; a `Node` is its name. An owner whose name cannot be one RFC 1123 label
    /// is exit 2, naming it; two owners with one host name, or one MAC held twice (within a
    /// subnet; for dnsmasq, anywhere), are exit 4 naming both. For dnsmasq so is a NIC whose
    /// addresses carry two MACs (a `mac set` interrupted between its pools), with the `mac
    /// set` that gives it one. Two subnets that overlap (two tenants' VPCs over one range)
    /// are exit 4 naming both, whatever the format: no server accepts both, so export per
    /// network (`-n NS`, `--pool`, `--subnet`). Same state, same bytes: sorted, no timestamp.
    Export(DhcpExportArgs),
    /// Compare a DHCP server's lease file with the allocations: what the guests leased.
    ///
    /// Reads Kea's memfile (`--format kea4`: `kea-leases4.csv`; `kea6`: `kea-leases6.csv`)
    /// or dnsmasq's lease file (`dnsmasq`, both families), and reports, on the segments
    /// (subnets, and pools without subnets) of the scope, every drift: `unheld`, a current
    /// lease of an address no allocation holds (released, or never claimed); `other-mac`, a
    /// current lease of a held address to another MAC than its allocation's; `never-leased`,
    /// a reservation (an allocation with a MAC) whose address the file has no lease of (the
    /// guest never came up); `expired`, a lease past its end (at `--at`, default now) or
    /// reclaimed that the server still records. Leases outside every segment of the scope
    /// are counted, not judged. A summary goes to stderr.
    ///
    /// Exit 0 without drift, 1 with drift (a CI gate or a cron alert, as `check` is); a
    /// malformed lease file is exit 2 naming its line. Nothing is written anywhere.
    Leases(DhcpLeasesArgs),
}

/// The formats of `dhcp export`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DhcpFormat {
    /// Kea's DHCPv4 server (`kea-dhcp4 -c FILE`).
    Kea4,
    /// Kea's DHCPv6 server (`kea-dhcp6 -c FILE`).
    Kea6,
    /// dnsmasq (`dnsmasq -C FILE`, or a file in `/etc/dnsmasq.d/`), IPv4 and IPv6.
    Dnsmasq,
}

// Which subnets an export covers (each flag repeatable; all must hold). A plain comment:
// clap takes a flattened group's doc comment for the command's own summary.
#[derive(Debug, Args, Default)]
pub struct ExportSelect {
    /// Only this pool (repeatable).
    #[arg(long = "pool", value_name = "POOL", add = ArgValueCompleter::new(complete::pools))]
    pub pools: Vec<String>,

    /// Only this stored subnet (repeatable).
    #[arg(long = "subnet", value_name = "SUBNET", add = ArgValueCompleter::new(complete::subnet_names))]
    pub subnets: Vec<String>,
}

// `ipamctl dhcp export`.
#[derive(Debug, Args)]
pub struct DhcpExportArgs {
    /// The server the configuration is for.
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: DhcpFormat,

    #[command(flatten)]
    pub select: ExportSelect,

    /// The interfaces Kea listens on (repeatable) [default: `*`, every interface]. For
    /// `kea6`, give one: it is also every `subnet6`'s `interface`.
    #[arg(long = "interface", value_name = "IF")]
    pub interfaces: Vec<String>,
}

// `ipamctl dhcp leases`.
#[derive(Debug, Args)]
pub struct DhcpLeasesArgs {
    /// The server that wrote the lease file: `kea4`, `kea6` (Kea's memfile CSV) or
    /// `dnsmasq` (its lease file, IPv4 and IPv6).
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: DhcpFormat,

    /// The lease file, as the server writes it (Kea's `lease-database` `name`, dnsmasq's
    /// `--dhcp-leasefile`): a regular file, read and never written; `-` reads stdin (`ssh
    /// host cat /var/lib/kea/kea-leases4.csv | ipamctl dhcp leases --format kea4 -`).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,

    #[command(flatten)]
    pub select: ExportSelect,

    /// Judge the leases' ends at this instant, RFC 3339 in UTC (e.g. `2026-12-07T00:00:00Z`:
    /// which leases will have lapsed by then) [default: now].
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,
}

/// `ipamctl dns ...`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum DnsCommand {
    /// Write DNS zone files: a forward zone of the NICs' host names and the reverse zones of
    /// their addresses, with a `named.conf` fragment listing them.
    ///
    /// Every allocation of a `VirtualMachine` or `Node` (but a Node named by its prefix,
    /// which has no name) is one A or AAAA record of its host name (as `dhcp export` names
    /// it) in ZONE, and one PTR record in the reverse zone that
    /// covers it: `in-addr.arpa` zones on octet boundaries and `ip6.arpa` zones on nibble
    /// boundaries (RFC 3596), each inside the subnet (a /20 gives the /24 zones that hold
    /// addresses). An IPv4 subnet longer than a /24 is exit 2 unless `--reverse-enclosing`
    /// says you serve its whole /24 (RFC 2317 delegation is not written). Files are
    /// `DIR/ZONE.zone`, `DIR/<reverse zone>.zone` and `DIR/named.conf`, which names each
    /// zone file relative to `--zone-dir` (bare, for named's `directory`, without it);
    /// `named-checkzone` and `named-checkconf` accept them.
    ///
    /// The SOA serial is derived from the state, not from DIR: the Unix time (in seconds)
    /// of the newest change the store records in the exported scopes (a file's or
    /// directory's modification time; a database's newest event). So every render of the
    /// same state gives the same serial, in any directory, and a change gives a higher one.
    /// A zone file already in DIR with the same records is left as it is; one ipamctl wrote
    /// with other records gets at least its serial plus one. A zone file ipamctl did not
    /// write is exit 4 unless `--replace-foreign`, and then gets a serial above its own.
    ///
    /// DIR is written and nothing else: it and every file in it are opened without
    /// following a symlink; a symlink, FIFO, device, directory or hard link where a file
    /// goes is exit 4, naming it; each file is replaced atomically (a new file renamed over
    /// it). Stdout lists each file with `created`, `configured` or `unchanged`.
    Export(DnsExportArgs),
}

// `ipamctl dns export`.
#[derive(Debug, Args)]
pub struct DnsExportArgs {
    /// The forward zone, e.g. `lab.example.com`.
    #[arg(long, value_name = "ZONE")]
    pub zone: String,

    /// The directory the files go to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,

    #[command(flatten)]
    pub select: ExportSelect,

    /// The name servers of every zone (repeatable; required: only you know which server
    /// serves them). One inside ZONE must be an exported host name (its address records
    /// are the glue).
    #[arg(long = "ns", value_name = "NAME", required = true)]
    pub ns: Vec<String>,

    /// The directory named reads the zone files from, as `named.conf` names them [default:
    /// none, bare file names, relative to named's `directory` option].
    #[arg(long, value_name = "DIR")]
    pub zone_dir: Option<String>,

    /// Replace a file in DIR that ipamctl did not write (a zone file gets a serial above
    /// its own) instead of refusing it.
    #[arg(long)]
    pub replace_foreign: bool,

    /// The SOA's responsible mailbox, as a name [default: `hostmaster.ZONE`].
    #[arg(long, value_name = "NAME")]
    pub mailbox: Option<String>,

    /// The zones' default TTL, in seconds.
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    pub ttl: u32,

    /// The SOA's refresh, in seconds.
    #[arg(long, default_value_t = 3600, value_name = "SECONDS")]
    pub refresh: u32,

    /// The SOA's retry, in seconds.
    #[arg(long, default_value_t = 900, value_name = "SECONDS")]
    pub retry: u32,

    /// The SOA's expire, in seconds.
    #[arg(long, default_value_t = 1_209_600, value_name = "SECONDS")]
    pub expire: u32,

    /// The SOA's minimum (the negative-caching TTL), in seconds.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    pub minimum: u32,

    /// The serial of a zone whose records changed or that is new [default: the state's
    /// newest change, as a Unix time; at least the serial of the file in DIR plus one].
    #[arg(long, value_name = "N")]
    pub serial: Option<u32>,

    /// Write an IPv4 subnet longer than a /24 into its whole /24 reverse zone (you serve
    /// all of it) instead of refusing it.
    #[arg(long)]
    pub reverse_enclosing: bool,
}
