//! `ipamctl list` and `ipamctl pool list|show|delete`: sorting, filters, the three output
//! formats, usage figures, and the conflicts of `pool delete`.

mod common;

use common::{Test, code, uid};

// --- list ---------------------------------------------------------------------------

#[test]
fn list_table_sorts_by_namespace_then_pool_then_numeric_address() {
    let ran = Test::new("populated").args(["list"]).stderr("").run();
    insta::assert_snapshot!(ran.stdout);
    let at = |needle: &str| ran.stdout.find(needle).expect(needle);
    // Numerically, not as strings: 10.42.0.9 before 10.42.0.10, and so on.
    assert!(at(" 10.42.0.9 ") < at(" 10.42.0.10 "));
    assert!(at(" 203.0.113.4 ") < at(" 203.0.113.10 "));
    // Cluster scope (`-`) first (namespaces at the start of a row: the uplink's owner is
    // named `VPC acme/prod/main`).
    assert!(at("public-zone-a") < at("\nacme/dev "));
    assert!(at("\nacme/dev ") < at("\nacme/prod "));
}

#[test]
fn list_all_namespaces_flag_is_the_default() {
    let all = Test::new("populated").args(["list"]).run();
    Test::new("populated")
        .args(["list", "-A"])
        .stdout(&all.stdout)
        .run();
}

#[test]
fn list_namespace_shows_only_that_namespace() {
    let ran = Test::new("populated")
        .args(["list", "-n", "acme/dev"])
        .run();
    insta::assert_snapshot!(ran.stdout, @r"
    NAMESPACE  POOL     ADDRESS    OWNER                    UID
    acme/dev   vpc-dev  10.50.0.2  VirtualMachine/web-01/0  0f8fad5b-d9cb-469f-a165-70867728950e
    ");
}

#[test]
fn list_filters_by_pool_owner_uid_and_address() {
    let addresses = |args: &[&str]| -> Vec<String> {
        let mut full = vec!["list", "-o", "json"];
        full.extend_from_slice(args);
        let ran = Test::new("populated").args(full).run();
        common::list_items(&ran.stdout)
            .iter()
            .map(|m| {
                m["spec"]["address"]
                    .as_str()
                    .expect("an address")
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(
        addresses(&["--pool", "vpc-main"]),
        ["10.42.0.2", "10.42.0.9", "10.42.0.10", "10.42.1.7"]
    );
    assert_eq!(
        addresses(&["--owner", "VirtualMachine/web-01/0"]),
        ["10.50.0.2", "10.42.0.2"]
    );
    assert_eq!(
        addresses(&["--uid", uid::WEB01]),
        ["10.50.0.2", "10.42.0.2", "10.42.0.10"]
    );
    assert_eq!(
        addresses(&["--uid", uid::WEB01, "-n", "acme/prod"]),
        ["10.42.0.2", "10.42.0.10"]
    );
    assert_eq!(addresses(&["--address", "203.0.113.10"]), ["203.0.113.10"]);
    assert_eq!(
        addresses(&["--owner", "VirtualMachine/web-01/0", "--uid", uid::WEB02]),
        Vec::<String>::new()
    );
}

#[test]
fn list_json_is_an_array_of_the_manifests_as_in_the_files() {
    let ran = Test::new("populated")
        .args(["list", "-o", "json", "-n", "acme/prod"])
        .run();
    insta::assert_snapshot!(ran.stdout);
    assert_eq!(common::list_items(&ran.stdout).len(), 4);
}

/// Files recorded in the owner index as exactly what ipamctl writes are rebuilt from their
/// records instead of read: the output must not change, and a file edited since (a label
/// added in place, as `cp` or an editor would) must be read again.
#[test]
fn list_answers_from_the_index_exactly_as_from_the_files() {
    let test = Test::new("populated");
    let run = |args: &[&str]| {
        let out = test.command(args).output().expect("run ipamctl");
        assert!(out.status.success(), "{args:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    for i in 0..3 {
        let owner = format!("FloatingIP/plain-{i}");
        run(&["allocate", "public-zone-a", "--owner", &owner]);
    }
    let list = || run(&["list", "-o", "json", "-A"]);
    let from_files = list();
    // Old enough to be recorded, then recorded by one look-up; the next is answered from it.
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(list(), from_files);
    let index =
        std::fs::read_to_string(test.path(".index/cluster/ipallocations/public-zone-a.idx"))
            .expect("the index was written");
    // `w<seconds>`: whole, with the claim's creationTimestamp, rebuilt without a read.
    let record = index.lines().find(|l| l.ends_with(" FloatingIP plain-1 -"));
    let whole = record.and_then(|l| l.split(' ').nth(5));
    assert!(
        whole.is_some_and(|w| w.len() > 1 && w[1..].bytes().all(|b| b.is_ascii_digit())),
        "{index}"
    );
    assert_eq!(list(), from_files);

    let file = test.path("cluster/ipallocations/public-zone-a-203-0-113-5.yaml");
    let text = std::fs::read_to_string(&file).expect("read");
    assert!(text.contains("plain-"), "{text}");
    let labelled = text.replacen("  labels:\n", "  labels:\n    team: web\n", 1);
    assert_ne!(labelled, text);
    std::fs::write(&file, labelled).expect("rewrite in place");
    let after = list();
    assert!(after.contains("\"team\": \"web\""), "{after}");
}

#[test]
fn list_of_many_files_is_sorted_and_warns_once_per_broken_file() {
    // Enough files that `list` reads them on several threads.
    let test = Test::new("populated").file_store_only();
    let dir = "namespaces/acme/prod/ipallocations";
    let pool = ipamctl::model::PoolName::new("vpc-main").expect("valid");
    let ns = ipamctl::model::Namespace::new("acme/prod").expect("valid");
    for i in 0..700u32 {
        let address = std::net::IpAddr::from(std::net::Ipv4Addr::from(0x0a2a_0200 + i));
        let owner = ipamctl::model::Owner::parse(&format!("FloatingIP/fip-{i}"), None)
            .expect("valid owner");
        let m = ipamctl::model::AllocationManifest::new(&pool, Some(&ns), address, owner);
        let name = ipamctl::model::allocation_name(&pool, address);
        test.write(&format!("{dir}/{name}.yaml"), &ipamctl::yaml::encode(&m));
    }
    // Written by hand (comment, unquoted address): the YAML library reads it.
    let by_hand = test
        .read(&format!("{dir}/vpc-main-10-42-1-7.yaml"))
        .replace("\"10.42.1.7\"", "10.42.1.7 # by hand");
    test.write(&format!("{dir}/vpc-main-10-42-1-7.yaml"), &by_hand);
    test.write(&format!("{dir}/vpc-main-10-42-5-5.yaml"), "spec: [\n");

    let ran = test
        .args([
            "list",
            "-o",
            "json",
            "-n",
            "acme/prod",
            "--pool",
            "vpc-main",
        ])
        .run();
    let addresses: Vec<std::net::Ipv4Addr> = common::list_items(&ran.stdout)
        .iter()
        .map(|m| {
            m["spec"]["address"]
                .as_str()
                .expect("an address")
                .parse()
                .expect("IPv4")
        })
        .collect();
    assert_eq!(addresses.len(), 4 + 700);
    assert!(addresses.is_sorted(), "not in address order");
    assert!(addresses.contains(&"10.42.1.7".parse().expect("IPv4")));
    let warnings: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(warnings.len(), 1, "{}", ran.stderr);
    assert!(
        warnings[0].starts_with(&format!("warning: {dir}/vpc-main-10-42-5-5.yaml: ")),
        "{}",
        ran.stderr
    );
}

#[test]
fn list_yaml_is_one_list_of_the_files_in_list_order() {
    let ran = Test::new("populated").args(["list", "-o", "yaml"]).run();
    let order = [
        "cluster/ipallocations/public-zone-a-203-0-113-4.yaml",
        "cluster/ipallocations/public-zone-a-203-0-113-10.yaml",
        "namespaces/acme/dev/ipallocations/vpc-dev-10-50-0-2.yaml",
        "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-2.yaml",
        "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-9.yaml",
        "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-10.yaml",
        "namespaces/acme/prod/ipallocations/vpc-main-10-42-1-7.yaml",
    ];
    // Each file, as an item of the List: `- ` before its first line, two spaces before
    // the others.
    let mut expected = String::from("apiVersion: v1\nkind: List\nitems:\n");
    for file in order {
        for (i, line) in ran.read(file).lines().enumerate() {
            expected.push_str(if i == 0 { "- " } else { "  " });
            expected.push_str(line);
            expected.push('\n');
        }
    }
    assert_eq!(ran.stdout, expected);
}

#[test]
fn list_with_nothing_to_show_says_so_on_stderr() {
    Test::new("seed")
        .args(["list"])
        .stdout("")
        .stderr("No allocations found.\n")
        .run();
    Test::new("populated")
        .args(["list", "--owner", "FloatingIP/nobody"])
        .stdout("")
        .stderr("No allocations found.\n")
        .run();
}

#[test]
fn list_of_a_pool_namespace_or_prefix_that_does_not_exist_is_not_found() {
    Test::new("populated")
        .args(["list", "--pool", "typo"])
        .stderr("error: pool `typo` not found in any namespace\nhint: `ipamctl pool list` shows the pools\n")
        .fails(code::NOT_FOUND)
        .run();
    Test::new("populated")
        .args(["list", "--pool", "vpc-main", "-n", "acme/dev"])
        .fails(code::NOT_FOUND)
        .run();
    Test::new("populated")
        .args(["list", "-n", "acme/nothing-here"])
        .stderr("error: namespace `acme/nothing-here` not found: it holds no pool and no allocation\nhint: `ipamctl pool list` shows the pools of every namespace\n")
        .fails(code::NOT_FOUND)
        .run();
    Test::new("populated")
        .args(["list", "--within", "192.168.0.0/24"])
        .fails(code::NOT_FOUND)
        .run();
    // An existing pool with nothing in it, or a prefix of a pool with nothing in it, is
    // an empty answer.
    Test::new("seed")
        .args(["list", "--pool", "public-zone-a", "-o", "name"])
        .stdout("")
        .run();
    Test::new("populated")
        .args(["list", "--within", "10.42.200.0/24", "-o", "name"])
        .stdout("")
        .run();
}

#[test]
fn list_selects_by_kind_prefix_within_and_labels() {
    let names = |args: &[&str]| -> String {
        let mut full = vec!["list", "-o", "name"];
        full.extend_from_slice(args);
        Test::new("populated").args(full).run().stdout.clone()
    };
    assert_eq!(
        names(&["--kind", "FloatingIP"]),
        "ipallocation/public-zone-a-203-0-113-4\n"
    );
    assert_eq!(
        names(&["--kind", "VirtualMachine", "-n", "acme/prod"]),
        "ipallocation/vpc-main-10-42-0-2\nipallocation/vpc-main-10-42-0-9\nipallocation/vpc-main-10-42-0-10\n"
    );
    assert_eq!(
        names(&["--owner", "VirtualMachine/web-01/", "-n", "acme/prod"]),
        "ipallocation/vpc-main-10-42-0-2\nipallocation/vpc-main-10-42-0-10\n"
    );
    assert_eq!(
        names(&["--within", "10.42.1.0/24"]),
        "ipallocation/vpc-main-10-42-1-7\n"
    );
    assert_eq!(
        names(&["--within", "10.42.0.8/29", "--kind", "VirtualMachine"]),
        "ipallocation/vpc-main-10-42-0-9\nipallocation/vpc-main-10-42-0-10\n"
    );
    assert_eq!(
        names(&["-l", "pivirt.hu/managed-by=director"])
            .lines()
            .count(),
        7
    );
    assert_eq!(names(&["-l", "pivirt.hu/managed-by!=director"]), "");
    assert_eq!(names(&["--selector", "!pivirt.hu/managed-by"]), "");
}

#[test]
fn list_refuses_malformed_or_contradictory_selectors() {
    for args in [
        &["list", "--kind", "Pod"][..],
        &["list", "--kind", "Node", "--owner", "FloatingIP/fip-1"],
        &["list", "-l", "a b=c"],
        &["list", "-l", "tier=web,"],
        &["list", "--within", "10.42.1.1/24"],
    ] {
        Test::new("populated").args(args).fails(code::INVALID).run();
    }
}

#[test]
fn list_json_with_nothing_to_show_is_an_empty_list() {
    Test::new("seed")
        .args(["list", "-o", "json"])
        .stdout("{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": []\n}\n")
        .stderr("")
        .run();
}

#[test]
fn list_shows_what_allocate_just_made() {
    Test::new("seed")
        .args([
            "allocate",
            "vpc-main",
            "-n",
            "acme/prod",
            "--owner",
            "Node/10.42.1.0/24",
        ])
        .stdout("10.42.0.1\n")
        .run()
        .then()
        .args(["list", "--address", "10.42.0.1"])
        .stdout(
            "NAMESPACE  POOL      ADDRESS    OWNER              UID\n\
             acme/prod  vpc-main  10.42.0.1  Node/10.42.1.0/24  -\n",
        )
        .run();
}

// --- pool list ----------------------------------------------------------------------

#[test]
fn pool_list_table_shows_usage() {
    let ran = Test::new("populated")
        .args(["pool", "list"])
        .stderr("")
        .run();
    insta::assert_snapshot!(ran.stdout);
}

#[test]
fn pool_list_of_small_pools_counts_rfc_3021_hosts() {
    let ran = Test::new("small-pools").args(["pool", "list"]).run();
    insta::assert_snapshot!(ran.stdout, @r"
    NAMESPACE  NAME  KIND     CIDR             ZONE  CANDIDATES  ALLOCATED  FREE  USED
    -          p30   public   198.51.100.4/30  -              1          0     1  0.0%
    -          p31   public   198.51.100.0/31  -              2          0     2  0.0%
    -          p32   public   198.51.100.8/32  -              1          0     1  0.0%
    lab        nogw  private  10.0.0.0/24      -            238          0   238  0.0%
    ");
}

#[test]
fn pool_list_namespace_shows_only_that_namespace() {
    let ran = Test::new("populated")
        .args(["pool", "list", "-n", "acme/dev"])
        .run();
    insta::assert_snapshot!(ran.stdout, @r"
    NAMESPACE  NAME     KIND     CIDR          ZONE  CANDIDATES  ALLOCATED  FREE  USED
    acme/dev   vpc-dev  private  10.50.0.0/24  -            253          1   252  0.4%
    ");
}

#[test]
fn pool_list_json_adds_a_status_to_each_manifest() {
    let ran = Test::new("populated")
        .args(["pool", "list", "-o", "json"])
        .run();
    insta::assert_snapshot!(ran.stdout);
    let pools = common::list_items(&ran.stdout);
    let main = pools
        .iter()
        .find(|p| p["metadata"]["name"] == "vpc-main")
        .expect("vpc-main is listed");
    assert_eq!(main["status"]["candidates"], 65534);
    assert_eq!(main["status"]["allocated"], 4);
    assert_eq!(main["status"]["free"], 65530);
}

#[test]
fn pool_list_yaml_is_a_list_of_manifests_with_status() {
    let ran = Test::new("small-pools")
        .args(["pool", "list", "-o", "yaml", "-n", "lab"])
        .run();
    insta::assert_snapshot!(ran.stdout, @r#"
    apiVersion: v1
    kind: List
    items:
    - apiVersion: pivirt.hu/v1
      kind: IPAMPool
      metadata:
        name: nogw
        namespace: lab
      spec:
        cidr: 10.0.0.0/24
        kind: private
        exclude:
        - 10.0.0.0/28
        - "10.0.0.100"
      status:
        candidates: 238
        allocated: 0
        free: 238
        percentUsed: 0.0
    "#);
}

#[test]
fn pool_list_of_an_empty_state_says_so_on_stderr() {
    Test::new("empty")
        .args(["pool", "list"])
        .stdout("")
        .stderr("No pools found.\n")
        .run();
}

// --- pool show ----------------------------------------------------------------------

#[test]
fn pool_show_prints_usage_and_free_ranges() {
    let ran = Test::new("populated")
        .args(["pool", "show", "vpc-main", "-n", "acme/prod"])
        .stderr("")
        .run();
    insta::assert_snapshot!(ran.stdout, @r"
    Name:        vpc-main
    Namespace:   acme/prod
    VPC:         acme/prod/main (uid 7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10)
    Kind:        private
    CIDR:        10.42.0.0/16
    Gateway:     -
    Exclude:     -
    Zone:        -
    Candidates:  65534
    Allocated:   4
    Free:        65530 (0.0% used)
    Free ranges: 10.42.0.1, 10.42.0.3-10.42.0.8, 10.42.0.11-10.42.1.6, 10.42.1.8-10.42.255.254
    ");
}

#[test]
fn pool_show_of_a_public_pool_with_gateway_and_excludes() {
    let ran = Test::new("populated")
        .args(["pool", "show", "public-zone-a"])
        .run();
    insta::assert_snapshot!(ran.stdout, @r"
    Name:        public-zone-a
    Namespace:   -
    Kind:        public
    CIDR:        203.0.113.0/24
    Gateway:     203.0.113.1
    Exclude:     203.0.113.2, 203.0.113.3
    Zone:        zone-a
    Candidates:  251
    Allocated:   2
    Free:        249 (0.8% used)
    Free ranges: 203.0.113.5-203.0.113.9, 203.0.113.11-203.0.113.254
    ");
}

#[test]
fn pool_show_of_a_full_pool_has_no_free_range() {
    let ran = Test::new("small-pools")
        .args(["allocate", "p32", "--owner", "FloatingIP/a"])
        .run()
        .then()
        .args(["pool", "show", "p32"])
        .run();
    assert!(ran.stdout.contains("Free ranges: none\n"), "{}", ran.stdout);
    assert!(
        ran.stdout.contains("Free:        0 (100.0% used)\n"),
        "{}",
        ran.stdout
    );
}

#[test]
fn pool_show_json_adds_status_with_free_ranges() {
    let ran = Test::new("populated")
        .args(["pool", "show", "vpc-dev", "-n", "acme/dev", "-o", "json"])
        .run();
    insta::assert_snapshot!(ran.stdout);
}

#[test]
fn pool_show_of_an_unknown_pool_is_not_found() {
    Test::new("populated")
        .args(["pool", "show", "nope"])
        .stderr("error: pool `nope` not found (cluster-scoped)\n")
        .fails(code::NOT_FOUND)
        .run();
}

// --- pool delete --------------------------------------------------------------------

#[test]
fn pool_delete_removes_a_pool_without_allocations() {
    let ran = Test::new("seed")
        .args(["pool", "delete", "vpc-main", "-n", "acme/prod"])
        .stdout("ipampool/vpc-main deleted\n")
        .run();
    assert_eq!(ran.files(), ["cluster/ipampools/public-zone-a.yaml"]);
}

#[test]
fn pool_delete_with_allocations_is_conflict_saying_how_many() {
    let ran = Test::new("populated")
        .args(["pool", "delete", "vpc-main", "-n", "acme/prod"])
        .fails(code::CONFLICT)
        .run();
    insta::assert_snapshot!(ran.stderr, @r"
    error: pool `acme/prod/vpc-main` still has 4 allocations
    hint: release them first: ipamctl list --pool vpc-main -n acme/prod
    ");
}

#[test]
fn pool_delete_after_releasing_everything_succeeds() {
    Test::new("populated")
        .args(["pool", "delete", "vpc-dev", "-n", "acme/dev"])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args([
            "release",
            "vpc-dev",
            "10.50.0.2",
            "-n",
            "acme/dev",
            "--force",
        ])
        .run()
        .then()
        .args(["pool", "delete", "vpc-dev", "-n", "acme/dev"])
        .stdout("ipampool/vpc-dev deleted\n")
        .run()
        .then()
        .args(["pool", "show", "vpc-dev", "-n", "acme/dev"])
        .fails(code::NOT_FOUND)
        .run();
}

#[test]
fn pool_delete_of_an_unknown_pool_is_not_found() {
    Test::new("seed")
        .args(["pool", "delete", "nope"])
        .stderr("error: pool `nope` not found (cluster-scoped)\n")
        .fails(code::NOT_FOUND)
        .run();
}
