//! The command line, as clap derive types. Their doc comments are the `--help` text and the
//! man pages. No I/O here.

// Length: one derive type per command, in the order `--help` lists them; their doc comments
// are the reference (`--help`, man pages), which reads best in one place. One indivisible
// table: each type is only its fields and their help, so a split would cut the table, not
// separate concepts (the one file over the layer test's ceiling, kept whole on purpose).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use clap_complete::ArgValueCompleter;

use crate::cli::complete;

const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  `check` found errors, `diff` found changes, `reconcile` found leaks; any other
     failure (I/O and the like)
  2  invalid usage or input
  3  not found (state directory, pool, namespace, prefix)
  4  conflict with the current state
  5  pool exhausted (a supernet: no free block of the length asked for)
  6  outcome unknown: lost connection during COMMIT; running it again is safe
  7  over a namespace's quota: nothing was claimed (`ipamctl quota list`)
  8  denied by a server (`ipamctl serve`): no token, a wrong one, or a verb it lacks
  9  `--server URL` cannot be reached: nothing was sent
  10  TLS with `--server https://…` failed: nothing was sent
  130  interrupted between two steps (`vpc delete`): run it again to finish

Examples:
  ipamctl init state && cd state
  ipamctl apply -f pools.yaml
  VM=$(virsh domuuid web-01)   # the VM's uuid (not bash's $UID, the user id)
  IP=$(ipamctl allocate vpc-main -n acme/prod --owner VirtualMachine/web-01/0 --uid \"$VM\")
  ipamctl list -n acme/prod
  ipamctl release vpc-main \"$IP\" -n acme/prod --owner VirtualMachine/web-01/0
  ipamctl check -o json   # in CI: exit 1 on any error";

/// `ipamctl --version`: the version and the commit it was built from (`build.rs`); `-V` and
/// the man pages say the version alone.
pub const LONG_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("IPAMCTL_COMMIT"),
    ")"
);

/// IPv4 and IPv6 address management in a git-friendly state directory.
///
/// ipamctl keeps IPv4 and IPv6 pools (IPAMPool) and the addresses handed out from them
/// (IPAllocation) as Kubernetes-style YAML manifests, one file per object. An address is claimed by
/// creating its file exclusively, so any number of ipamctl processes can allocate at once
/// without a server: two never get the same address, and an owner that asks twice gets the
/// same address back.
#[derive(Debug, Parser)]
#[command(
    name = "ipamctl",
    version,
    long_version = LONG_VERSION,
    after_help = AFTER_HELP,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Options that every command takes, before or after the subcommand.
#[derive(Debug, Args, Clone)]
pub struct GlobalArgs {
    /// The state directory [default: the nearest parent directory holding `.ipamctl`].
    #[arg(
        short = 'd',
        long,
        global = true,
        env = "IPAMCTL_STATE_DIR",
        value_name = "DIR"
    )]
    pub state_dir: Option<PathBuf>,

    /// A PostgreSQL database instead of a state directory: `postgresql://USER@HOST/DB` or
    /// libpq `key=value` pairs (`host=/run/postgresql dbname=ipam sslmode=verify-full`).
    /// The password comes from the string, `PGPASSWORD` or the password file (`PGPASSFILE`,
    /// `~/.pgpass`); other `PG*` variables fill in what the string leaves out. Create the
    /// schema once with `ipamctl --store URL init`. Not with `--state-dir`.
    #[arg(
        long,
        global = true,
        env = "IPAMCTL_STORE",
        hide_env_values = true,
        value_name = "URL"
    )]
    pub store: Option<String>,

    /// Run the command on an `ipamctl serve` at URL (`https://HOST:PORT`, or `http://` on a
    /// trusted network) instead of a local store: `allocate`, `release` (with or without
    /// `-f`, and with `-l`), `list`, `pool list|show|create|delete`, `vpc
    /// create|get|list|delete`, `subnet create|list|show|delete`, `mac set`, `metrics` and
    /// `quota list` print what they print locally, with the same exit codes; a command that
    /// needs a local state is exit 2.
    /// The token comes from `--token-file` or `IPAMCTL_TOKEN`. Not with `--store` or
    /// `--state-dir`.
    #[arg(long, global = true, env = "IPAMCTL_SERVER", value_name = "URL")]
    pub server: Option<String>,

    /// The file holding the bearer token `--server` is called with (`ipamctl token create`
    /// printed it) [default: the `IPAMCTL_TOKEN` variable]. It is sent to the server only.
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// PEM certificates to verify `--server https://…` with, instead of the system's roots.
    #[arg(long, global = true, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Output format: table (the default), wide (a table with more columns), json or yaml
    /// (one document; a list is a kubectl `List`), or name (`kind/name` lines). Without
    /// `-o`, `allocate` prints the address alone and `vpc create` the VPC's uid alone. svg
    /// is the image of `pool show --map`, and nothing else draws it.
    #[arg(
        short = 'o',
        long = "output",
        id = "output",
        global = true,
        value_enum,
        value_name = "FORMAT"
    )]
    pub format: Option<FormatArg>,

    /// Tables without their header line.
    #[arg(long, global = true)]
    pub no_headers: bool,

    /// `--output` as the commands that render data see it: the same, or `None` for svg, which
    /// only `pool show --map` (reading [`GlobalArgs::format`]) accepts. Set before dispatch.
    #[arg(skip)]
    pub output: Option<OutputFormat>,

    /// The namespace of the pool or allocations (omit for cluster-scoped public pools).
    #[arg(short, long, global = true, value_name = "NS", add = ArgValueCompleter::new(complete::namespaces))]
    pub namespace: Option<String>,

    /// Every namespace (the default for `list`, `pool list` and uid-wide `release`).
    #[arg(short = 'A', long, global = true, conflicts_with = "namespace")]
    pub all_namespaces: bool,
}

/// `-o` values, as typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// A human-readable table.
    Table,
    /// A table with more columns.
    Wide,
    /// JSON, for `jq`.
    Json,
    /// YAML manifests, as stored.
    Yaml,
    /// `kind/name` lines.
    Name,
    /// An SVG image (`pool show --map` only).
    Svg,
    /// A Markdown report, ready to post on a pull request (`diff` only).
    Markdown,
    /// One self-contained HTML page (`report` only).
    Html,
}

/// The data formats every command renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// A human-readable table.
    Table,
    /// A table with more columns.
    Wide,
    /// JSON, for `jq`.
    Json,
    /// YAML manifests, as stored.
    Yaml,
    /// `kind/name` lines.
    Name,
}

/// The subcommands.
///
/// Deferred (here and in `pool`, `subnet` and `vpc`): a subcommand's arguments are built only
/// when it is the one parsed (or when `--help`, the man pages or completion build the whole
/// tree). Building all of them cost every process, `allocate` on PostgreSQL included, about
/// half a millisecond before it did anything. A deferred `Args` struct's doc comment would be
/// applied after its variant's and replace the command's help, so those structs carry plain
/// comments; the help text is on the variants.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Make a directory an ipamctl state directory, or create the schema in a database
    /// (idempotent).
    ///
    /// Writes the `.ipamctl` marker (which carries the layout version) and a `.gitignore`
    /// that keeps locks, the derived index and temporary files out of git. With `--store`,
    /// creates or upgrades the `ipamctl` schema of the database in one transaction; a
    /// schema newer than this ipamctl is refused.
    Init(InitArgs),
    /// Create or update pools and subnets from YAML manifests, all or nothing.
    ///
    /// Every document of every file is validated before anything is written; `Subnet`
    /// documents are checked against their pools (which the same input may create) under
    /// the pools' locks. A pool change that would break what the pool holds is exit 4,
    /// naming the holders: an allocation, a subnet or a prefix claim left outside, its kind
    /// changed while it holds any of them, a VPC's pool leaving the range its VPC claimed.
    /// Prints `ipampool/<name>` or `subnet/<name>` and `created|configured|unchanged` per
    /// object (with `-o json|yaml`, the objects with `status.action`).
    Apply(ApplyArgs),
    /// Claim an address for an owner and print it.
    ///
    /// An owner that already holds an address in the pool gets it back. Otherwise the first
    /// free candidate in the pool's `pick` order is claimed: the lowest (the default), or
    /// with `pick: hashed` the first at or above a position derived from the pool and the
    /// owner's kind and name, wrapping around to the lowest. A candidate is a host address
    /// of the pool that is not the gateway, not excluded, inside `--within` or `--subnet`
    /// (and not that subnet's gateway or reserved addresses), not `--reserved` and not
    /// taken. In a pool with `reuseAfter`, an address released less than that long ago goes
    /// only to the owner that released it (which gets it back first); other owners skip it.
    Allocate(AllocateArgs),
    /// Free addresses: one address, or every allocation the selectors pick.
    ///
    /// `POOL ADDRESS` releases one address; otherwise the selectors (`--owner`, `--uid`,
    /// `--kind`, `--within`, `-l`) pick the allocations, in POOL if given, else in every
    /// pool of `-n NS` (every namespace without it); at least one selector is required.
    /// Each is released guarded by its owner, so an address re-allocated meanwhile stays.
    /// `POOL ADDRESS` needs `--owner`, `--uid` or `--kind` next to it, which guard it: the
    /// release happens only if they match the holder (else exit 4), so a mistyped address
    /// frees nobody's; without one it is exit 2 with a hint naming the holder, unless
    /// `--force`. Releasing an address nobody holds succeeds (a note goes to stderr), so
    /// retries are safe. Selectors that match nothing are exit 3 (a mistyped `--owner`
    /// would otherwise leak the real one's address unnoticed); `--ignore-not-found` makes
    /// that a note and exit 0, for scripts that retry a release. Prints `ipallocation/<name>
    /// released` per allocation (with `-o json|yaml`, the allocations with `status.action`).
    /// In a pool with `reuseAfter`, each release first writes a cooldown record
    /// (`<scope>/cooldown/<pool>-<a-b-c-d>.yaml`, commit it with the rest) that keeps the
    /// address from other owners for that long.
    Release(ReleaseArgs),
    /// List allocations, sorted by namespace, pool and address.
    ///
    /// The selectors narrow the list; all must hold. A pool, namespace or `--within` prefix
    /// that does not exist is exit 3, not an empty list.
    List(ListArgs),
    /// Inspect and delete pools.
    #[command(subcommand)]
    Pool(PoolCommand),
    /// Create, show and delete VPCs: each owns a private pool `vpc-<NAME>` in its namespace
    /// and, in public pools, its router's uplinks (owner `VPC/router` with the VPC's uid).
    #[command(subcommand)]
    Vpc(VpcCommand),
    /// Store named subnets of a pool: its range, gateway and reserved addresses, for
    /// `allocate --subnet`.
    ///
    /// A subnet lives in its pool's scope (`-n NS` for a private pool), lies inside the pool
    /// and overlaps no other subnet of it (exit 4). Every change holds the pool's lock, so
    /// concurrent creates cannot overlap and a claim always sees the subnet as it stands.
    #[command(subcommand)]
    Subnet(SubnetCommand),
    /// Show each namespace's quotas: what it holds of each resource against the ceiling.
    ///
    /// A `Quota` manifest (written by `apply -f`) caps what a namespace holds: `addresses`
    /// (allocations in its pools; a dual-stack claim counts one per family), `floatingIPs`
    /// (its floating IPs in public pools) and `prefixes` (its prefix claims and its VPCs'
    /// ranges). A claim that would go over a ceiling is exit 7 and claims nothing.
    #[command(subcommand)]
    Quota(QuotaCommand),
    /// Change the MAC of a NIC's allocation (`spec.mac`); the NIC keeps its address.
    ///
    /// A MAC is held by at most one allocation of a pool. `allocate --mac` gives one when
    /// the address is claimed; an owner that asks again with another MAC is refused (exit 4)
    /// with the `mac set` command that changes it, because a replaced NIC keeps its address.
    #[command(subcommand)]
    Mac(MacCommand),
    /// Renew a lease (`allocate --ttl`): the same address, a new `spec.expiresAt`.
    ///
    /// Selects the lease by its owner (`--owner`, with `--uid` if it has one) or by its
    /// address, in POOL (of the `-n` scope). It only renews: a lease that lapsed and was
    /// released (by `reconcile --expired --apply`) is exit 3, never a new claim, and an
    /// allocation without a lease is exit 4. Prints the address alone (`-o json|yaml`: the
    /// allocation). `allocate --ttl` by the owner renews too, and claims when nothing is
    /// held. On PostgreSQL the database server's clock decides.
    Renew(RenewArgs),
    /// Find (and with `--apply`, release) allocations whose owners no longer exist.
    ///
    /// `--live FILE` lists the owners that still exist, one per line, as `KIND/NAME` or a
    /// UUID (e.g. the output of `virsh list --all --uuid`); `#` starts a comment. Any other
    /// line (a hostname) is exit 2, naming it, and nothing is released. A list speaks only
    /// for the kinds of owners it names (its `KIND/NAME` lines' kinds, and the kinds of the
    /// owners its uids hold allocations for): allocations of other kinds are left alone, so
    /// a list of VMs never makes a floating IP look leaked; `--kind KIND` judges one kind,
    /// `--all-kinds` every kind, and a list that names no kind is exit 2 without one of them.
    /// Every allocation judged whose owner matches no line is a leak, unless it was claimed
    /// after the list was taken (`--live-as-of`, by `metadata.creationTimestamp`) or is
    /// younger than `--min-age`. Without `--apply`, exit 1 when there are leaks (0 when none), as
    /// `check`. `--apply` refuses (exit 4, nothing released) to release more than
    /// `--max-release`. Each release is guarded by the reported owner, so an address
    /// re-allocated to a live owner meanwhile stays. The summary (stderr) also says how
    /// many live lines matched an allocation (few: the list is of the wrong thing).
    Reconcile(ReconcileArgs),
    /// Write a database's pools and allocations as a new state directory (`--store` only).
    ///
    /// The files are byte for byte what the file store would have written, so the result
    /// can be committed and reviewed, or used with `-d`. Reads one consistent snapshot.
    /// DIR must not exist or be empty.
    Export(TransferArgs),
    /// Load a state directory into a database, all or nothing (`--store` only).
    ///
    /// Every manifest is validated first (exit 2 if one is broken, as `ipamctl check`
    /// would report). Objects the database holds with the same bytes are left as they are,
    /// so an import can be run again; one that conflicts with what the database holds (other
    /// contents, an address held by another owner, an owner holding another address or
    /// another prefix of a supernet, a pool that would not fit what the database holds
    /// under its name, as for `apply`) is exit 4 and nothing is imported.
    Import(TransferArgs),
    /// Validate the whole state directory; exit 1 if anything is wrong (a CI gate).
    ///
    /// Reads every manifest and reports, as errors: files that do not parse, have a wrong
    /// apiVersion or kind, or unknown fields; a metadata.name or metadata.namespace that
    /// disagrees with the file's path; an allocation whose file name is not
    /// `<pool>-<a-b-c-d>` of its own address, whose pool does not exist, or whose address
    /// is not a candidate of its pool (outside the prefix, the network or broadcast
    /// address, the gateway, an exclude: a pool edited after the fact); an owner holding
    /// two addresses in one pool; an owner's name held under two identities (two uids, or
    /// a uid and none) in one pool; a NIC's MAC (`spec.mac`) held by two allocations of one
    /// pool, one that does not parse, one that carries its pool's `macPrefix` but is not
    /// what `--mac auto` derives, and a NIC whose allocations carry different MACs (each
    /// with its fix, `ipamctl mac set`); overlapping public
    /// pools; a private pool outside
    /// `namespaces/` or a public one inside; symlinks. As warnings: files and directories
    /// the layout does not have, dot-files in `ipampools/` and `ipallocations/` other than
    /// ipamctl's own lock and index files, leftover temporary files (`.tmp-*`), cooldown
    /// records that hold nothing back (past their pool's reuseAfter, of a pool without one,
    /// or of no pool), cooldown records dated ahead of this machine's clock, and an
    /// allocation whose MAC has no record in `<scope>/macs/` or a record naming another
    /// address (a claim killed before its record, a MAC written by hand), a lease lapsed
    /// past its grace and still held, and a namespace holding more than one of its quotas
    /// allows (a hand edit, a merge, a lowered quota). Outside
    /// `cluster/` and `namespaces/`, only the root's `.ipamctl` and `.gitignore` are looked
    /// at, so the state directory can be a repository's root.
    ///
    /// Findings go to stdout (SEVERITY, PATH, MESSAGE; or `-o json|yaml`, a List of
    /// `{severity, path, message}`; `-o name`, the paths with findings), sorted by path. A
    /// one-line summary goes to stderr:
    /// `ok: ...` or `error: N errors, M warnings in DIR ...`. Exit 0 when there is no
    /// error (warnings allowed), 1 when there is one: run it on every pull request of the
    /// repository that holds the state directory. Nothing is written, unless `--fix`.
    Check(CheckArgs),
    /// Show what a branch changes in a state directory kept in git, and what it breaks.
    ///
    /// Compares the fork point of HEAD and BASE (as `git diff BASE...HEAD` does) with HEAD,
    /// or without HEAD with the working tree as it is, files git does not track yet included
    /// (a fresh claim is an untracked file). BASE defaults to the current branch's upstream,
    /// else HEAD. Lists claims, releases, owner changes, MAC changes, pool and subnet changes (created,
    /// changed, deleted) and cooldown records (started, changed, ended), and the conflicts
    /// with the invariants: an address claimed on both sides by different owners, an owner
    /// claiming in one pool on both sides, an allocation edited in place instead of created
    /// or deleted, an allocation left outside its pool or on a subnet's gateway, reserved
    /// or edge address. `-o table|wide|json|yaml|name` or
    /// `markdown` (a pull-request comment). Exit 0 when nothing changed, 1 when something
    /// did (as `git diff --exit-code`), 4 when a change conflicts with the invariants.
    Diff(DiffArgs),
    /// Show who held an address, or what an owner held, and when, from git.
    ///
    /// Reads `git log` of the allocation files: each claim, release and in-place edit with
    /// its commit, author and date, newest first. An address is looked up in every pool of
    /// the scope (`--pool` narrows it); `--owner` (prefix form too) and `--uid` follow the
    /// owner across addresses. On a database (`--store`), the same from its events table.
    History(HistoryArgs),
    /// Report every pool: usage, map, subnets, free ranges and largest holders (a supernet's
    /// claimed prefixes and free blocks).
    ///
    /// `-o html` writes one self-contained HTML page (inline CSS and SVG maps, no script,
    /// nothing fetched) for a wiki or a CI artifact: a table of every pool, then each pool
    /// with its usage, its map (each allocated cell's tooltip names its holder), its stored
    /// subnets with their usage, its free ranges and its largest holders, named by their
    /// owners (the NICs of one VM, which share a uid, together), largest first, then by
    /// name; "every holder has N" when none is larger. A supernet's largest holder is the
    /// one whose prefixes cover the most addresses, named as `pool show` names it (`VPC
    /// t/x/red (/52)` for a VPC's range). Counts are written as `pool list`
    /// writes them (`2^64 - 4`); the exact values are in `-o json`. A subnet's gateway,
    /// reserved, network and broadcast addresses are never counted as free. The other
    /// formats give the same data.
    Report,
    /// Print Prometheus metrics of every pool and subnet in scope, for alerting before a
    /// pool runs out.
    ///
    /// Text exposition format (version 0.0.4), one gauge per figure: for each address pool
    /// and each subnet its capacity (candidates), allocated, free and used fraction (0 to 1)
    /// and its allocations on non-candidate addresses; for each pool the cooldown records
    /// that keep an address now; for each supernet its claimed child prefixes, its largest
    /// free block and its free blocks of each length it hands out; for each ceiling of a
    /// namespace's quota, what the namespace holds (`ipamctl_quota_used`) and the ceiling
    /// (`ipamctl_quota_limit`), labelled `namespace`, `quota` and `resource`, for an alert
    /// at 90 %. Labels: `namespace`
    /// (empty for a public pool), `pool`, `subnet`, `family` (`ipv4` or `ipv6`), `zone`.
    /// The figures are the ones `pool list -o json` and `subnet list -o json` print. Counts
    /// are written exactly; Prometheus keeps each sample as a 64-bit float, so a count above
    /// 2^53 (an IPv6 prefix shorter than /75) is kept to 53 significant bits. Every pool of
    /// every namespace without `-n`. The output is sorted and carries no timestamp: the same
    /// state gives the same bytes.
    Metrics(MetricsArgs),
    /// Serve the GraphQL API over HTTP on the same store (`-d DIR` or `--store URL`).
    ///
    /// `POST /graphql` (and `GET` for queries), `GET /healthz`, `GET /readyz` (503 while the
    /// store does not answer) and `GET /metrics`. Prints `listening on URL` on stderr for
    /// each address once it accepts connections, then one line per request. Plain HTTP only
    /// on loopback addresses unless `--insecure`; TLS with `--tls-cert` and `--tls-key`.
    /// Every request needs `Authorization: Bearer TOKEN` (but `/healthz` and `/readyz`).
    /// SIGTERM or SIGINT stops accepting, finishes the requests in flight (at most
    /// `--shutdown-timeout`) and exits 0. `--print-schema` prints the schema (SDL) and exits.
    Serve(crate::cli::serve_args::ServeArgs),
    /// DHCP reservations for Kea and dnsmasq, from the allocations' MACs.
    #[command(subcommand)]
    Dhcp(crate::cli::DhcpCommand),
    /// DNS zones of the NICs' host names and their addresses' reverse names.
    #[command(subcommand)]
    Dns(crate::cli::DnsCommand),
    /// Print the JSON Schemas of the six manifests (IPAMPool, IPAllocation, Subnet,
    /// CooldownRecord, IPPrefixClaim, Quota).
    ///
    /// Without an argument, one JSON object `{"IPAMPool": ..., "IPAllocation": ..., ...}`
    /// keyed by kind; with one, that schema alone, as committed under `schema/`
    /// (`schema/ipampool.json`, `schema/ipallocation.json`, `schema/subnet.json`,
    /// `schema/cooldownrecord.json`, `schema/ipprefixclaim.json`, `schema/quota.json`). Point an editor at them to validate manifests as they are
    /// typed: `# yaml-language-server: $schema=<path or URL of schema/ipampool.json>`.
    Schema(SchemaArgs),
    /// Print a shell completion script.
    ///
    /// The script asks `ipamctl` for candidates as you type, so it completes pool,
    /// namespace and subnet names from the state directory (`IPAMCTL_STATE_DIR`, else the
    /// nearest parent of the current directory holding `.ipamctl`) as well as commands and
    /// options. For bash: `ipamctl completions bash > /etc/bash_completion.d/ipamctl`, or
    /// `source <(ipamctl completions bash)`; the same script comes from `COMPLETE=bash
    /// ipamctl`.
    Completions(CompletionsArgs),
    /// Make, list and revoke the bearer tokens a server accepts (`--tokens FILE`).
    ///
    /// A token is a 256-bit random secret, printed once by `token create`, kept in the
    /// tokens file only as its SHA-256, with a scope: namespace patterns (`acme/prod`, or
    /// `acme/*` for the namespaces beneath `acme`), verbs (`read`, `claim`, `admin`) and,
    /// with `--cluster`, the cluster scope (public pools). The file is written atomically
    /// with mode 0600 under a lock, never through a symlink; a file group or others may read
    /// is refused (exit 2). Tokens are managed only here, never through the API; a running
    /// server notices a new or revoked token within two seconds.
    #[command(subcommand)]
    Token(crate::cli::TokenCommand),
}

// `ipamctl init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The directory [default: `--state-dir`, else the current directory].
    pub dir: Option<PathBuf>,
}

// `ipamctl diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The base revision [default: the upstream branch, else HEAD].
    pub base: Option<String>,

    /// The revision to compare [default: the working tree].
    pub head: Option<String>,
}

// `ipamctl history`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("subject").required(true).args(["address", "owner", "uid"])))]
pub struct HistoryArgs {
    /// The address, or a prefix (`2001:db8:100::/56`) for a supernet's prefix claims.
    #[arg(value_name = "ADDRESS|PREFIX")]
    pub address: Option<String>,

    /// Only this pool's allocations and prefix claims.
    #[arg(long, value_name = "POOL", add = ArgValueCompleter::new(complete::pools))]
    pub pool: Option<String>,

    /// The owner (KIND/NAME; a trailing `/` selects by prefix).
    #[arg(long, value_name = "KIND/NAME")]
    pub owner: Option<String>,

    /// The owner uid.
    #[arg(long, value_name = "UID")]
    pub uid: Option<String>,
}

// `ipamctl export` and `ipamctl import`.
#[derive(Debug, Args)]
pub struct TransferArgs {
    /// The state directory.
    pub dir: PathBuf,
}

// `ipamctl apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// A YAML file of IPAMPool documents; `-` reads stdin. Repeatable.
    #[arg(short, long = "filename", value_name = "FILE", required = true)]
    pub file: Vec<String>,

    /// Check everything and print what would change (`would-create`, `would-configure`,
    /// `unchanged`); write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

// `ipamctl allocate`.
#[derive(Debug, Args)]
pub struct AllocateArgs {
    /// The pool to claim from (omit with `--zone`). Name several (e.g. a VPC's `vpc-NAME`
    /// and `vpc-NAME-v6`) to claim one address in each, all or nothing: when a later pool
    /// cannot give one, the addresses this request claimed are released again (what the
    /// owner held before stays) and the exit code is the later pool's. One address per
    /// line, in the order given; `-o json|yaml` a List.
    #[arg(value_name = "POOL", required_unless_present_any = ["zone", "file"], add = ArgValueCompleter::new(complete::pools))]
    pub pools: Vec<String>,

    /// Claim every request of FILE (`-` reads stdin), one by one, each as its own `allocate`:
    /// JSON lines (one object a line) or a YAML list, each request with the fields `pool`
    /// or `pools`, `namespace`, `owner`, `uid`, `subnet` or `subnets`, `address`, `within`,
    /// `reserved`, `zone`, `mac`, `prefixLength`, `prefix` and `dryRun` (a list, as `pools`,
    /// where the flag is given several times; `pool` and `pools` together are refused), e.g.
    /// `{"pools": ["vpc-a", "vpc-a-v6"], "owner": "VirtualMachine/db-01/0", "mac": "auto"}`;
    /// `-n` applies to the requests that do not set it, `--dry-run` to every request
    /// (whatever it says). One result per request, in input order (`-o
    /// json`: a JSON line each); a request that fails, or a line that is not a valid
    /// request (named by its line number), does not stop the others. Exit 0 when every
    /// request succeeded, else, after every result is printed, the exit code the failed
    /// requests share, or 1 when theirs differ. Nothing is printed that a crash could take
    /// back: on a state directory results come in groups of up to 16, once every claim made
    /// in the group is durable (its directory synced behind the next request); on a
    /// database once the group's transaction committed.
    #[arg(short = 'f', long = "filename", value_name = "FILE", conflicts_with_all = ["pools", "zone", "tenant", "owner", "uid", "within", "subnet", "reserved", "address", "prefix_length", "prefix", "mac", "explain"])]
    pub file: Option<String>,

    /// With `-f` on a database (`--store`): run the batch on N connections at once, each
    /// request its own unit of work on one of them. Results
    /// still come in input order, but the requests run concurrently: one that depends on
    /// an earlier one (an `address` another request may take) races with it as two
    /// processes would. Each connection runs up to 32 requests in one transaction (each
    /// undone alone if it fails; their results printed once it committed), and the
    /// connections hand out addresses apart, each the next none of them has. Default 1: one
    /// request after another, in input order, as a state directory's batch always runs.
    #[arg(long, value_name = "N", requires = "file", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,

    /// Claim a floating IP from the public pools of this zone instead of one pool: tried in
    /// name order, moving on when one is exhausted (exit 5 only when all are).
    #[arg(long, value_name = "ZONE", conflicts_with_all = ["pools", "namespace", "within", "address"])]
    pub zone: Option<String>,

    /// Claim the floating IP for this namespace (a tenant), from the cluster's public pools
    /// (`--zone` or a public POOL): `--owner FloatingIP/NAME` is then the tenant's own, held
    /// as `FloatingIP/NS/NAME` with the label `pivirt.hu/tenant`, so two tenants who name a
    /// floating IP alike never share it, nor wait on or refuse each other.
    #[arg(long, value_name = "NS")]
    pub tenant: Option<String>,

    /// The owner as KIND/NAME: VirtualMachine/<host>/<nic>, FloatingIP/<name> (a tenant's:
    /// FloatingIP/<tenant>/<name>, or `--tenant`), VPC/router or Node/<subnet>.
    #[arg(long, value_name = "KIND/NAME", required_unless_present = "file")]
    pub owner: Option<String>,

    /// The owner's uid: a UUID (any case, kept lowercase), e.g. the VM's `virsh domuuid`;
    /// anything else is exit 2. Part of its identity: omitted means an owner without a uid.
    /// An owner's name (every kind but `VPC`) is one identity per pool: asking for a name
    /// that the pool holds under another uid, or without one, is exit 4 naming the holder's
    /// address and uid, never a second address.
    #[arg(long, value_name = "UUID")]
    pub uid: Option<String>,

    /// Only claim inside this prefix of the pool (its network and broadcast, or in IPv6 its
    /// subnet-router anycast address, are skipped). One pool only. A stored subnet
    /// (`--subnet`) also keeps its gateway and reserved addresses.
    #[arg(long, value_name = "CIDR", add = ArgValueCompleter::new(complete::subnets))]
    pub within: Option<String>,

    /// Only claim inside this stored subnet of the pool (`ipamctl subnet create`): never its
    /// network, broadcast, gateway or reserved addresses. Exit 5 names the subnet when it is
    /// full. With several pools, give it once per pool, in the order of the pools: a
    /// dual-stack NIC is `allocate vpc-x vpc-x-v6 --subnet web --subnet web6`, all or
    /// nothing. (No claim of a pool gets a subnet's gateway or reserved addresses, with or
    /// without `--subnet`.)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["within", "zone"], add = ArgValueCompleter::new(complete::subnet_names))]
    pub subnet: Vec<String>,

    /// Never hand out this address in this request (e.g. a subnet gateway). Repeatable.
    #[arg(long, value_name = "ADDR")]
    pub reserved: Vec<String>,

    /// Claim exactly this address (exit 4 if someone else holds it). One pool only.
    #[arg(long, value_name = "ADDR")]
    pub address: Option<String>,

    /// Claim a child prefix of this length from a supernet pool and print it in CIDR form:
    /// the best fit (the lowest block of that length inside the smallest free aligned
    /// block that can hold it), so large aligned blocks stay whole. The same owner again
    /// gets the same prefix; a length outside the pool's `prefixLengths` is exit 2; no free
    /// block of that length is exit 5, naming the largest free block. One pool only.
    #[arg(long, value_name = "N", conflicts_with_all = ["zone", "within", "subnet", "reserved", "address", "explain", "prefix"])]
    pub prefix_length: Option<u8>,

    /// Claim exactly this child prefix of a supernet pool (exit 4 if it overlaps a claim or
    /// an exclude, naming it). One pool only.
    #[arg(long, value_name = "CIDR", conflicts_with_all = ["zone", "within", "subnet", "reserved", "address", "explain"])]
    pub prefix: Option<String>,

    /// Print what would be allocated (`would-create` in JSON and YAML); write nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// The MAC of the owner's NIC, stored as the allocation's `spec.mac` (for DHCP): six
    /// hex octets, `:`, `-` or `.` separated or bare, any case (written lowercase with
    /// colons); a multicast, broadcast or all-zero MAC is exit 2. Only for owners with a NIC
    /// (`VirtualMachine`, `Node`; others are exit 2). `auto` derives it from the pool's
    /// `spec.macPrefix` and the address (exit 2 if the pool has none): unique in the pool
    /// and the same on every ask. With several pools (dual stack) every allocation gets the
    /// same MAC; `auto` derives it from the first pool's address, so it is unique only there
    /// (give the families different `macPrefix`es, or a later `auto` may be exit 4). A MAC another allocation
    /// of the pool holds is exit 4 naming it; the same owner asking again with another MAC
    /// is exit 4 naming `ipamctl mac set`, which changes it.
    #[arg(long, value_name = "MAC|auto", conflicts_with_all = ["zone", "prefix_length", "prefix"])]
    pub mac: Option<String>,

    /// Claim a lease that lapses DURATION from now (`90s`, `15m`, `1h`, `7d`) unless the
    /// owner asks again with `--ttl` (or runs `ipamctl renew`), which renews it: the same
    /// address, a new `spec.expiresAt`. A lapsed lease is released by `reconcile --expired
    /// --apply` after its grace. Without `--ttl` a claim never lapses, and asking again
    /// leaves a lease as it is. On PostgreSQL the database server's clock decides.
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["prefix_length", "prefix"])]
    pub ttl: Option<String>,

    /// Explain on stderr why the address is the one chosen (the one claimed, or with
    /// `--dry-run` the one that would be), listing each lower address and why it is skipped
    /// (network or broadcast, subnet-router anycast, outside `--within`, gateway, excluded,
    /// reserved, taken and by whom, or released by another owner within the pool's
    /// reuseAfter), at most 20 lines and a count of the rest. Stdout is as without it. One
    /// pool only.
    #[arg(long, conflicts_with = "zone")]
    pub explain: bool,
}

/// `ipamctl mac …`.
#[derive(Debug, Subcommand)]
pub enum MacCommand {
    /// Give the NIC holding ADDRESS in POOL a new MAC, on every address it holds in the
    /// scope (a dual-stack NIC's IPv4 and IPv6); it keeps its addresses.
    ///
    /// Guarded like `release POOL ADDRESS`: `--owner` and `--uid` are a filter, so the
    /// holder's name must be `--owner` and, when `--uid` is given, its uid that one (else
    /// exit 4 naming it); an address nobody holds is exit 3. All or nothing: a MAC another
    /// allocation holds in any of the NIC's pools is exit 4 naming it, and nothing changes.
    /// `--mac auto` derives it from POOL's `spec.macPrefix` and ADDRESS, and that one MAC
    /// goes on every allocation of the NIC. Setting the MAC it already has is `unchanged`.
    /// Prints `ipallocation/<name> configured` for each allocation of the NIC, ADDRESS's
    /// first (with `-o json|yaml`, the allocations with `status.action`). On a state
    /// directory each allocation is written on its own: a process killed between two
    /// leaves the NIC with two MACs, which `check` reports and the same command finishes.
    Set(MacSetArgs),
}

// `ipamctl renew`.
#[derive(Debug, Args)]
pub struct RenewArgs {
    /// The pool (in the `-n` scope).
    #[arg(add = ArgValueCompleter::new(complete::pools))]
    pub pool: String,

    /// The lease's address [default: the one `--owner` holds].
    #[arg(required_unless_present = "owner")]
    pub address: Option<String>,

    /// The lease's owner, as KIND/NAME (its exact identity, with `--uid` if it has one).
    #[arg(long, value_name = "KIND/NAME", conflicts_with = "address")]
    pub owner: Option<String>,

    /// The owner's uid.
    #[arg(long, value_name = "UUID", requires = "owner")]
    pub uid: Option<String>,

    /// How long from now the lease runs (`90s`, `15m`, `1h`, `7d`).
    #[arg(long, value_name = "DURATION")]
    pub ttl: String,

    /// Say what the lease's new `expiresAt` would be; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

// `ipamctl mac set`.
#[derive(Debug, Args)]
pub struct MacSetArgs {
    /// The pool (in the `-n` scope).
    #[arg(add = ArgValueCompleter::new(complete::pools))]
    pub pool: String,

    /// The address the NIC holds.
    pub address: String,

    /// The holder, as KIND/NAME (`VirtualMachine/<host>/<nic>` or `Node/<subnet>`).
    #[arg(long, value_name = "KIND/NAME")]
    pub owner: String,

    /// The holder's uid: when given, the holder's must be this one; omitted, the name
    /// alone guards (as `release`'s `--uid`).
    #[arg(long, value_name = "UUID")]
    pub uid: Option<String>,

    /// The new MAC, or `auto` (as `allocate --mac`).
    #[arg(long, value_name = "MAC|auto")]
    pub mac: String,
}

// `ipamctl release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The pool [default: every pool of the scope].
    #[arg(add = ArgValueCompleter::new(complete::pools))]
    pub pool: Option<String>,

    /// The address (or, in a supernet pool, the prefix in CIDR form) to release;
    /// `--owner`/`--uid`/`--kind` then guard it (one is required, or `--force`).
    pub address: Option<String>,

    #[command(flatten)]
    pub select: Selectors,

    /// Release `POOL ADDRESS` whoever holds it, without naming the owner.
    #[arg(long, requires = "address")]
    pub force: bool,

    /// Release every request of FILE (`-` reads stdin), one by one, each as its own
    /// `release`: JSON lines or a YAML list, each request with the fields `pool`, `address`
    /// (or a prefix in CIDR form), `namespace`, `owner`, `uid`, `kind`, `tenant`, `within`,
    /// `labels` (`-l`), `force`, `ignoreNotFound` and `dryRun`, guarded as a single release
    /// is; `-n` and `--ignore-not-found` apply to the requests that do not set them,
    /// `--dry-run` to every request (whatever it says: a preview never releases).
    /// Results and exit codes as `allocate -f`.
    #[arg(short = 'f', long = "filename", value_name = "FILE", conflicts_with_all = ["pool", "address", "force", "kind", "owner", "uid", "within", "labels", "tenant"])]
    pub file: Option<String>,

    /// With `-f` on a database (`--store`): run the batch on N connections at once, each
    /// request its own unit of work on one of them. Results
    /// still come in input order, but the requests run concurrently: one that depends on
    /// an earlier one (an `address` another request may take) races with it as two
    /// processes would. Each connection runs up to 32 requests in one transaction (each
    /// undone alone if it fails; their results printed once it committed), and the
    /// connections hand out addresses apart, each the next none of them has. Default 1: one
    /// request after another, in input order, as a state directory's batch always runs.
    #[arg(long, value_name = "N", requires = "file", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,

    /// Selectors that match nothing are a note and exit 0 instead of exit 3 (as kubectl's
    /// flag of that name): for a script whose release may already have happened. Next to
    /// `POOL ADDRESS` it changes nothing (an address nobody holds is success already), so
    /// that `release -f --ignore-not-found` takes requests of both forms.
    #[arg(long)]
    pub ignore_not_found: bool,

    /// Print what would be released (`would-release`); release nothing.
    #[arg(long)]
    pub dry_run: bool,
}

// Which allocations `list` and `release` select; every selector given must hold.
#[derive(Debug, Args, Default, Clone)]
pub struct Selectors {
    /// Only allocations of owners of this kind: VirtualMachine, FloatingIP, VPC or Node.
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,

    /// Only allocations of this owner (KIND/NAME). A trailing `/` selects by prefix:
    /// `VirtualMachine/web-01/` is every NIC of `web-01`.
    #[arg(long, value_name = "KIND/NAME")]
    pub owner: Option<String>,

    /// Only allocations of this owner uid (a UUID).
    #[arg(long, value_name = "UUID")]
    pub uid: Option<String>,

    /// Only addresses inside this prefix (e.g. a subnet: 10.42.1.0/24). Exit 3 if no pool
    /// of the scope overlaps it.
    #[arg(long, value_name = "CIDR", add = ArgValueCompleter::new(complete::subnets))]
    pub within: Option<String>,

    /// Only allocations whose labels match: `key=value`, `key!=value`, `key`, `!key`,
    /// comma-separated, all of which must hold (as kubectl's `-l`).
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR")]
    pub labels: Option<String>,

    /// Only the floating IPs claimed for this namespace (`allocate --tenant`); with
    /// `--owner FloatingIP/NAME`, its floating IP of that name. Another tenant's floating IP
    /// of the same name is never selected.
    #[arg(long, value_name = "NS")]
    pub tenant: Option<String>,
}

// `ipamctl list`.
#[derive(Debug, Args, Default)]
pub struct ListArgs {
    /// Only allocations of this pool (exit 3 if it does not exist).
    #[arg(long, value_name = "POOL", add = ArgValueCompleter::new(complete::pools))]
    pub pool: Option<String>,

    /// Only the allocation of this address.
    #[arg(long, value_name = "ADDR")]
    pub address: Option<String>,

    /// Only allocations inside this stored subnet (of the `-n` scope): its pool, within its
    /// prefix.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pool", "within"], add = ArgValueCompleter::new(complete::subnet_names))]
    pub subnet: Option<String>,

    /// Only the allocation whose NIC has this MAC (`spec.mac`, any spelling `allocate
    /// --mac` takes): its holder in each pool.
    #[arg(long, value_name = "MAC")]
    pub mac: Option<String>,

    /// Only the allocations of the NIC with this host name, the name DHCP hands the guest
    /// and DNS gives its addresses (any case): `web-01` is `VirtualMachine/web-01/0` or
    /// `Node/web-01`, `web-01-2` is NIC 2 of `web-01` (or a VM or Node so named, which the
    /// exports refuse as a clash).
    #[arg(long, value_name = "NAME")]
    pub host_name: Option<String>,

    /// Only the leases that have lapsed (`spec.expiresAt` passed, by the store's clock:
    /// this machine's, or the database server's), still held until `reconcile --expired
    /// --apply` releases them.
    #[arg(long)]
    pub expired: bool,

    #[command(flatten)]
    pub select: Selectors,
}

/// `ipamctl pool ...`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum PoolCommand {
    /// Create a public pool: cluster-scoped (no `-n`), where floating IPs and VPC router
    /// uplinks come from. Asked again as it stands, `unchanged`; a pool of that name with
    /// another spec, or one overlapping another public pool, is exit 4 (`apply` changes a
    /// pool). Other kinds of pool are made by `apply` and `vpc create`.
    Create(PoolCreateArgs),
    /// List pools with their usage: candidates, allocated, free, percent used.
    List,
    /// Show one pool, its usage and its free addresses as compact ranges; or, with `--map`,
    /// draw it.
    ///
    /// `--map` draws one cell per address, 32 to a row (16 for a /28 or smaller), each row
    /// labelled with its first address and a blank line between /24s: `#` allocated, `.`
    /// free, `G` gateway (the pool's or a stored subnet's), `r` reserved by a subnet, `x`
    /// excluded, `-` network or broadcast (of the pool, of `--within` or of a subnet). A
    /// prefix larger than a /22 is drawn one cell per /24 (a blank line between /16s),
    /// shaded by the share of its candidates allocated, a step taken once its lower bound is
    /// reached: `.` none, `:` under 5%, `+` 5% to under 20%, `*` 20% to under 80%, `%` 80% or
    /// more, `#` full, `x` no candidates; each stored subnet in the view gets a line with its
    /// counts (and the cell that holds it). An IPv6 prefix larger than a /120 is drawn one
    /// cell per /120 in use (up to a /64; when at most four are, those /120s address by
    /// address), or one line per stored subnet and per /64 in use with its counts (larger),
    /// shaded by how many allocations it holds on a log scale (1 to 9, 10 to 99, 100 to
    /// 999, 1,000 or more). Views up to a /12 are drawn. A legend with counts, what the
    /// shades measure and the usage figures follow. A supernet is drawn by its prefixes,
    /// each claim with its holder (a VPC's range as `VPC NAMESPACE/NAME`). `-o svg` writes
    /// the same map as an SVG document, each cell of class `cell KIND`.
    ///
    /// Without `--map`, a supernet lists each claimed prefix with its holder, and an address
    /// pool its stored subnets with their usage.
    Show(PoolShowArgs),
    /// Delete a pool; refused (exit 4) while it has allocations.
    Delete(PoolDeleteArgs),
}

/// `ipamctl quota ...`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum QuotaCommand {
    /// List the quotas of `-n NS` (every namespace without it, or with `-A`): one row per
    /// ceiling, with what the namespace holds now.
    ///
    /// Columns NAMESPACE, QUOTA, RESOURCE, USED, LIMIT; USED is counted from the stored
    /// objects at the moment, as a claim counts it. USED above LIMIT means the namespace
    /// is over (a quota lowered below what it held, a hand edit, a merge): its claims are
    /// refused until it is back under. `-o json|yaml` print a List of the quotas, each with
    /// its ceilings (`spec.hard`) and what is held (`status.used`), as Kubernetes shows a
    /// `ResourceQuota`; `-o name` one `quota/NAME` per quota.
    ///
    /// Example: `ipamctl quota list -n acme/prod`; `ipamctl metrics` gives the same figures
    /// as `ipamctl_quota_used` and `ipamctl_quota_limit`, for an alert at 90 %.
    List(QuotaListArgs),
}

// `ipamctl quota list`.
#[derive(Debug, Args)]
pub struct QuotaListArgs {}

/// `ipamctl subnet ...`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum SubnetCommand {
    /// Create a subnet of a pool and print its gateway.
    ///
    /// The gateway defaults to the subnet's first host address. Creating a subnet that
    /// exists with the same spec succeeds (`unchanged`), so retries are safe; with another
    /// spec it is exit 4 (change it with `apply -f`). Exit 4 too when it leaves its pool,
    /// overlaps another subnet of the pool, or would make an allocated address (or one the
    /// pool's `reuseAfter` keeps cooling for its last owner) its gateway, network,
    /// broadcast or a reserved address. Without `-o`, stdout gets the gateway alone
    /// (`subnet/NAME created` goes to stderr).
    Create(SubnetCreateArgs),
    /// List subnets (of `-n NS`, else of every scope), with their usage.
    List(SubnetListArgs),
    /// Show a subnet and its usage: candidates, allocated, free, free ranges.
    Show(SubnetNameArgs),
    /// Delete a subnet; refused (exit 4) while an allocation holds an address inside it.
    Delete(SubnetDeleteArgs),
}

// `ipamctl subnet create`.
#[derive(Debug, Args)]
pub struct SubnetCreateArgs {
    /// The subnet's name (an RFC 1123 label), unique in its scope.
    pub name: String,

    /// The pool it is a range of (in the `-n` scope).
    #[arg(long, value_name = "POOL", add = ArgValueCompleter::new(complete::pools))]
    pub pool: String,

    /// The subnet's prefix, inside the pool's, e.g. 10.42.1.0/24; prints the gateway.
    #[arg(long, value_name = "CIDR", required_unless_present = "prefix_length")]
    pub cidr: Option<String>,

    /// Carve the subnet instead: the next free block of this length in the pool (best fit:
    /// inside the smallest free aligned block that holds it, lowest first), overlapping no
    /// sibling subnet and making no allocated or cooling address its gateway, network or
    /// broadcast address; prints its prefix. Concurrent carves get disjoint blocks; the same name again
    /// returns the subnet it has. No free block is exit 5.
    #[arg(long, value_name = "N", conflicts_with_all = ["cidr", "gateway", "reserved"])]
    pub prefix_length: Option<u8>,

    /// The gateway, never handed out [default: the first host address].
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<String>,

    /// An address or prefix of the subnet never handed out. Repeatable.
    #[arg(long, value_name = "ADDR|CIDR")]
    pub reserved: Vec<String>,

    /// Check and print what would be created; create nothing.
    #[arg(long)]
    pub dry_run: bool,
}

// `ipamctl subnet list`.
#[derive(Debug, Args)]
pub struct SubnetListArgs {
    /// Only subnets of this pool.
    #[arg(long, value_name = "POOL", add = ArgValueCompleter::new(complete::pools))]
    pub pool: Option<String>,
}

// `ipamctl subnet show`.
#[derive(Debug, Args)]
pub struct SubnetNameArgs {
    /// The subnet.
    #[arg(add = ArgValueCompleter::new(complete::subnet_names))]
    pub name: String,
}

// `ipamctl subnet delete`.
#[derive(Debug, Args)]
pub struct SubnetDeleteArgs {
    /// The subnet.
    #[arg(add = ArgValueCompleter::new(complete::subnet_names))]
    pub name: String,

    /// A subnet that does not exist is success (exit 0), so retries are safe.
    #[arg(long)]
    pub ignore_not_found: bool,

    /// Check that the subnet could be deleted and print `would-delete`; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// `ipamctl vpc ...`.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum VpcCommand {
    /// Create a VPC's private pool `vpc-<NAME>` in `-n NS`, owned by the VPC; print its uid.
    ///
    /// The pool carries `ownerRefs: [{kind: VPC, uid, controller: true}]`. Idempotent: a
    /// VPC that exists with the same CIDR (and `--uid`, if given) prints its uid and exits
    /// 0 (`existing`); with another CIDR or uid it is exit 4. Without `-o`, stdout gets the
    /// uid alone (`ipampool/vpc-<NAME> created|existing` goes to stderr); with `-o`, the
    /// pool and its action.
    Create(VpcCreateArgs),
    /// Print a VPC's uid; with `-o json|yaml`, the VPC: its uid, pool and router uplinks.
    Get(VpcGetArgs),
    /// List the VPCs (of `-n NS`, else every namespace): name, uid, CIDR and uplinks.
    List,
    /// Delete a VPC: release its router uplinks (every allocation owned by the VPC's uid, in
    /// any pool) and every allocation of its pool, then remove the pool.
    ///
    /// Holds the pool's lock exclusively, so no concurrent `allocate` can leave an
    /// allocation behind; after a crash half-way, running it again finishes the job.
    /// `--dry-run` lists all of it. A VPC that does not exist is exit 3, or 0 with
    /// `--ignore-not-found`, so a retry loop can run it again safely.
    Delete(VpcDeleteArgs),
}

// `ipamctl vpc create`.
#[derive(Debug, Args)]
pub struct VpcCreateArgs {
    /// The VPC's name; its pools are `vpc-<NAME>` (IPv4) and `vpc-<NAME>-v6` (IPv6). A name
    /// ending in `-v6` is refused (exit 2): its IPv4 pool would carry another VPC's IPv6
    /// pool's name.
    pub name: String,

    /// The VPC's range, e.g. 10.42.0.0/16 (pool `vpc-NAME`) or fd00:42::/48 (pool
    /// `vpc-NAME-v6`). Give it twice, one of each family, for a dual-stack VPC: both pools
    /// are created, or neither.
    #[arg(long, value_name = "CIDR", required_unless_present = "from_pool")]
    pub cidr: Vec<String>,

    /// Draw the VPC's range from this supernet pool instead (one in the VPC's namespace,
    /// else the cluster-scoped one): the range is claimed from it by best fit, owned by
    /// `VPC/router` with the VPC's uid, and released by `vpc delete`. Give it with
    /// `--prefix-length`; once per family, and mixable with `--cidr` for the other family.
    #[arg(long, value_name = "POOL", requires = "prefix_length", add = ArgValueCompleter::new(complete::pools))]
    pub from_pool: Vec<String>,

    /// The length of the range drawn from `--from-pool`, e.g. 56; one per `--from-pool`,
    /// in the same order.
    #[arg(long, value_name = "N", requires = "from_pool")]
    pub prefix_length: Vec<u8>,

    /// The VPC's uid, a UUID [default: a fresh random UUID].
    #[arg(long, value_name = "UID")]
    pub uid: Option<String>,

    /// The pools' `spec.macPrefix` (three octets, locally administered and unicast, e.g.
    /// 52:54:00), so that `allocate --mac auto` derives MACs in them. Once per pool, IPv4's
    /// first; a dual-stack VPC's two must differ (exit 2). Again on an existing VPC it must
    /// match its pools' (exit 4 otherwise).
    #[arg(long, value_name = "PREFIX")]
    pub mac_prefix: Vec<String>,

    /// Also claim the VPC router's uplink (`VPC/router` with the VPC's uid) from this zone's
    /// public pools, in name order as `allocate --zone` does; asked again, the same one.
    /// `vpc delete` releases it with the VPC.
    #[arg(long, value_name = "ZONE")]
    pub uplink_zone: Option<String>,

    /// Check and print the pool that would be created; create nothing.
    #[arg(long)]
    pub dry_run: bool,
}

// `ipamctl vpc get`.
#[derive(Debug, Args)]
pub struct VpcGetArgs {
    /// The VPC's name.
    #[arg(add = ArgValueCompleter::new(complete::vpcs))]
    pub name: String,
}

// `ipamctl vpc delete`.
#[derive(Debug, Args)]
pub struct VpcDeleteArgs {
    /// The VPC's name.
    #[arg(add = ArgValueCompleter::new(complete::vpcs))]
    pub name: String,

    /// List what would be released and removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// A VPC that does not exist (already deleted) is success, with a note on stderr.
    #[arg(long)]
    pub ignore_not_found: bool,
}

// `ipamctl reconcile`.
#[derive(Debug, Args)]
pub struct ReconcileArgs {
    /// The owners that still exist: `KIND/NAME` or a uid per line; `-` reads stdin.
    #[arg(long, value_name = "FILE", required_unless_present = "expired")]
    pub live: Option<String>,

    /// Instead of a live list: the leases (`allocate --ttl`) whose `expiresAt` plus
    /// `--grace` has passed, by the store's clock (this machine's; the database server's
    /// on PostgreSQL), in the namespace (`-n`, `-A`) and `--pool` selected. Each is judged
    /// again as it is released, so a renewal that lands first keeps its lease (`skipped`).
    /// `--min-age` and `--max-release` do not apply: a lapsed lease is its owner's own
    /// statement. A released lease goes through the pool's cooldown (`reuseAfter`).
    #[arg(long, conflicts_with_all = ["live", "kind", "all_kinds", "allow_empty", "live_as_of"])]
    pub expired: bool,

    /// With `--expired`: how long after `expiresAt` a lease is released: the margin for a
    /// late renewal and for the clocks of hosts that share a state directory (`0s` allowed).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5m",
        requires = "expired"
    )]
    pub grace: String,

    /// With `--expired`: only this pool's leases.
    #[arg(long, value_name = "POOL", requires = "expired")]
    pub pool: Option<String>,

    /// Judge the allocations of owners of this kind (VirtualMachine, FloatingIP, VPC, Node)
    /// against the list [default: only the kinds the list names: those of its `KIND/NAME`
    /// lines, and of the owners its uids hold allocations for].
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,

    /// Judge every allocation in scope against the list, of whatever kind: an owner the
    /// list does not name is dead, whatever its kind.
    #[arg(long, conflicts_with = "kind")]
    pub all_kinds: bool,

    /// Release the leaked allocations (without it, only report them).
    #[arg(long)]
    pub apply: bool,

    /// Allow `--apply` with an empty live list (which would release everything in scope).
    #[arg(long)]
    pub allow_empty: bool,

    /// With `--apply`: print what would be released (`would-release`); release nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// When the live list was taken (RFC 3339, e.g. `2026-12-01T07:00:00Z`): allocations
    /// claimed at or after it are never released [default: the live file's modification
    /// time; required when the list comes from stdin or a pipe].
    #[arg(long, value_name = "TIME")]
    pub live_as_of: Option<String>,

    /// Leave allocations younger than this alone (e.g. `5m`, `1h`, `0`).
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub min_age: String,

    /// With `--apply`: refuse (exit 4, nothing released) to release more than this many
    /// allocations, a count or a percentage of those checked.
    #[arg(long, value_name = "N|P%", default_value = "25%")]
    pub max_release: String,
}

// `ipamctl pool create`.
#[derive(Debug, Args)]
pub struct PoolCreateArgs {
    /// The pool's name (an RFC 1123 label).
    pub name: String,

    /// The pool's prefix (no host bits), e.g. 203.0.113.0/24.
    #[arg(long, value_name = "CIDR")]
    pub cidr: String,

    /// An address of the prefix never handed out (the upstream router).
    #[arg(long, value_name = "ADDR")]
    pub gateway: Option<String>,

    /// An address or prefix never handed out; repeatable.
    #[arg(long, value_name = "ADDR|CIDR")]
    pub exclude: Vec<String>,

    /// Where the pool is routable (an RFC 1123 label): `allocate --zone` and
    /// `vpc create --uplink-zone` claim from the zone's public pools.
    #[arg(long, value_name = "ZONE")]
    pub zone: Option<String>,

    /// Check the pool could be created and print `would-create`; create nothing.
    #[arg(long)]
    pub dry_run: bool,
}

// `ipamctl pool delete`.
#[derive(Debug, Args)]
pub struct PoolDeleteArgs {
    /// The pool.
    #[arg(add = ArgValueCompleter::new(complete::pools))]
    pub pool: String,

    /// Check that the pool could be deleted and print `would-delete`; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
}

// `ipamctl pool show`.
#[derive(Debug, Args)]
pub struct PoolShowArgs {
    /// The pool.
    #[arg(add = ArgValueCompleter::new(complete::pools))]
    pub pool: String,

    /// Draw the pool as an address map (text, or an image with `-o svg`): one cell per
    /// address up to an IPv4 /22 or an IPv6 /120; else one cell per /24 (IPv4, up to a /12),
    /// per /120 that holds an allocation (IPv6, up to a /64) or per stored subnet and /64 in
    /// use (a larger IPv6 prefix), shaded by the share allocated (blocks) or the count of
    /// allocations on a log scale (IPv6 subnets and /64s); a supernet by its prefixes and
    /// their holders.
    #[arg(long)]
    pub map: bool,

    /// Only this prefix of the pool: its usage and free ranges as `allocate --within` sees
    /// them, or with `--map` its drawing (its network and broadcast, or its IPv6
    /// subnet-router anycast address, are marked as such).
    #[arg(long, value_name = "CIDR", add = ArgValueCompleter::new(complete::subnets))]
    pub within: Option<String>,

    /// Colour the map: `auto` when stdout is a terminal and `NO_COLOR` is unset or empty.
    #[arg(long, value_enum, value_name = "WHEN", default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// `--color` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Colour when stdout is a terminal and `NO_COLOR` is not set.
    Auto,
    /// Always colour, even into a pipe or with `NO_COLOR` set.
    Always,
    /// Never colour.
    Never,
}

// `ipamctl check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Remove leftover temporary files (`.tmp-*`) untouched for 5 minutes and cooldown
    /// records that hold nothing back (each judged again under its pool's lock, so a
    /// release writing a fresh one meanwhile keeps it), printing `removed PATH` to stderr
    /// for each. Make the record in `<scope>/macs/` of an allocation whose MAC has none. Settle
    /// a MAC held by two allocations of a pool: it stays on the allocation its record names
    /// (else the one created first, then the lowest address) and is removed from the others,
    /// which keep their addresses (`removed MAC M from PATH ...`; give their NICs a MAC with
    /// `ipamctl mac set`). Each allocation is read again under its owner's lock first. No other
    /// manifest, lock file or the index is touched.
    #[arg(long)]
    pub fix: bool,
}

// `ipamctl metrics`.
#[derive(Debug, Args)]
pub struct MetricsArgs {
    /// Write to FILE instead of stdout, atomically (a temporary file in FILE's directory,
    /// renamed over it), so node_exporter's textfile collector never reads half a file.
    /// The file is readable by everyone (mode 0644).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Also run `check` on the whole store and export its findings by severity
    /// (`ipamctl_check_problems`). It reads every manifest, as `check` does: at 50,000
    /// allocations it costs seconds where the rest costs milliseconds.
    #[arg(long)]
    pub check: bool,

    /// Also compare a DHCP server's lease file with the allocations, as `ipamctl dhcp
    /// leases` does, and export each kind of drift per subnet (`ipamctl_dhcp_lease_drift`);
    /// FORMAT is `kea4`, `kea6` or `dnsmasq` (repeatable: one per server).
    #[arg(long, value_name = "FORMAT=FILE")]
    pub dhcp_leases: Vec<String>,
}

// `ipamctl schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Only this manifest kind's schema.
    #[arg(value_enum)]
    pub kind: Option<SchemaKind>,
}

/// The manifest kinds with a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaKind {
    /// `IPAMPool`.
    Ipampool,
    /// `IPAllocation`.
    Ipallocation,
    /// `Subnet`.
    Subnet,
    /// `CooldownRecord` (written by `release` in a pool with `reuseAfter`).
    Cooldownrecord,
    /// `IPPrefixClaim` (a child prefix of a supernet pool, written by `allocate --prefix-length`).
    Ipprefixclaim,
    /// `Quota` (a namespace's ceilings, written by `apply`).
    Quota,
}

// `ipamctl completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Shells with completion scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    /// GNU bash.
    Bash,
    /// Z shell.
    Zsh,
    /// fish.
    Fish,
}
