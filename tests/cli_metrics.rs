//! `ipamctl metrics`, driving the real binary: Prometheus' own promtool accepts the
//! exposition and the README's alerting rules, every value equals what `pool list -o json`
//! and `subnet list -o json` print, `--out` replaces the file in one rename, and `--check`
//! counts what `check` finds. Runs on PostgreSQL too (`IPAMCTL_TEST_STORE=postgres`).

mod book;
mod common;

use std::collections::BTreeMap;

use common::{Test, code, list_items, promtool};

/// Pools and subnets beside the `dual-stack` fixture's: a supernet, a pool with a
/// cooldown and two subnets of it (the released address is in `cool-low`), a stored IPv6
/// subnet.
const EXTRA: &str = r#"apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: carrier-v6}
spec: {cidr: "2001:db8:200::/52", kind: supernet, prefixLengths: {min: 56, max: 64}}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: cool4
spec: {cidr: 192.0.2.0/29, kind: public, zone: zone-b, reuseAfter: 1h}
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata:
  name: web6
  namespace: acme/prod
spec:
  pool: vpc-main-v6
  cidr: "fd00:42:0:1::/64"
  gateway: "fd00:42:0:1::1"
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata: {name: cool-low}
spec: {pool: cool4, cidr: 192.0.2.0/30}
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata: {name: cool-high}
spec: {pool: cool4, cidr: 192.0.2.4/30}
"#;

/// The `dual-stack` fixture with [`EXTRA`] applied, a prefix claimed from the supernet, an
/// address released into its cooldown, allocations in the IPv6 subnet and a full pool.
fn state() -> Test {
    let test = Test::new("dual-stack");
    let file = test.input("extra.yaml", EXTRA);
    let mut test = test.args(["apply", "-f", &file]).run().then();
    for args in [
        "allocate carrier-v6 --prefix-length 60 --owner FloatingIP/c1",
        "allocate carrier-v6 --prefix-length 64 --owner FloatingIP/c2",
        "allocate cool4 --owner FloatingIP/a",
        "allocate cool4 --owner FloatingIP/b",
        "release cool4 --owner FloatingIP/a",
        "allocate vpc-main-v6 -n acme/prod --subnet web6 --owner VirtualMachine/vm-1/0",
        "allocate vpc-main-v6 -n acme/prod --subnet web6 --owner VirtualMachine/vm-2/0",
        "allocate tiny -n acme/prod --owner VirtualMachine/vm-1/0",
        "allocate tiny -n acme/prod --owner VirtualMachine/vm-2/0",
    ] {
        test = test.args(args.split(' ')).run().then();
    }
    test
}

/// The samples of an exposition, by metric name and then by their labels as written.
fn samples(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut all: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("`series value`");
        let (name, labels) = series.split_once('{').expect("labels");
        let labels = labels.strip_suffix('}').expect("closing brace");
        let previous = all
            .entry(name.to_owned())
            .or_default()
            .insert(labels.to_owned(), value.to_owned());
        assert_eq!(previous, None, "a series written twice: {line}");
    }
    all
}

/// The labels a pool's samples carry, as written.
fn pool_labels(item: &serde_json::Value) -> String {
    let m = &item["metadata"];
    let cidr = item["spec"]["cidr"].as_str().expect("cidr");
    format!(
        "namespace=\"{}\",pool=\"{}\",family=\"{}\",zone=\"{}\"",
        m["namespace"].as_str().unwrap_or(""),
        m["name"].as_str().expect("name"),
        if cidr.contains(':') { "ipv6" } else { "ipv4" },
        item["spec"]["zone"].as_str().unwrap_or("")
    )
}

/// A JSON count (a number, or a decimal string above 2^53) as written.
fn count(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Number(n) => n.to_string(),
        serde_json::Value::Null => "0".into(), // offCandidates is left out when 0
        other => panic!("not a count: {other}"),
    }
}

/// The value of `name`'s sample with `labels`.
#[track_caller]
fn value<'a>(
    all: &'a BTreeMap<String, BTreeMap<String, String>>,
    name: &str,
    labels: &str,
) -> &'a str {
    all.get(name)
        .and_then(|m| m.get(labels))
        .unwrap_or_else(|| panic!("no {name}{{{labels}}} in {all:#?}"))
}

/// Checks the usage samples of one pool or subnet (`what`) against its JSON `status`.
#[track_caller]
fn same_usage(
    all: &BTreeMap<String, BTreeMap<String, String>>,
    what: &str,
    labels: &str,
    status: &serde_json::Value,
) {
    let metric = |m: &str| value(all, &format!("ipamctl_{what}_{m}"), labels).to_owned();
    assert_eq!(
        metric("capacity_addresses"),
        count(&status["candidates"]),
        "{labels}"
    );
    assert_eq!(
        metric("allocated_addresses"),
        count(&status["allocated"]),
        "{labels}"
    );
    assert_eq!(metric("free_addresses"), count(&status["free"]), "{labels}");
    assert_eq!(
        metric("off_candidate_allocations"),
        count(&status["offCandidates"]),
        "{labels}"
    );
    // percentUsed is rounded to one decimal; the ratio is not.
    let ratio: f64 = metric("used_ratio").parse().expect("a float");
    let percent = status["percentUsed"].as_f64().expect("percentUsed");
    assert!(
        (ratio * 100.0 - percent).abs() <= 0.05 + 1e-9,
        "{labels}: ratio {ratio} against {percent}%"
    );
}

#[test]
fn metric_values_equal_pool_list_and_subnet_list_json() {
    let test = state();
    let ran = test.args(["metrics"]).run();
    let text = ran.stdout.clone();
    let all = samples(&text);
    let ran = ran.then().args(["pool", "list", "-o", "json"]).run();
    let pools = list_items(&ran.stdout);
    assert_eq!(pools.len(), 12, "the fixture's 10 pools and 2 more");
    let (mut addresses, mut supernets) = (0, 0);
    for pool in &pools {
        let labels = pool_labels(pool);
        let status = &pool["status"];
        if pool["spec"]["kind"] == "supernet" {
            supernets += 1;
            let claimed = status["claimed"].as_array().expect("claimed").len();
            assert_eq!(
                value(&all, "ipamctl_supernet_claimed_prefixes", &labels),
                claimed.to_string()
            );
            let largest: ipnet::IpNet = status["largestFree"]
                .as_str()
                .expect("largestFree")
                .parse()
                .unwrap();
            assert_eq!(
                value(&all, "ipamctl_supernet_largest_free_prefix_length", &labels),
                largest.prefix_len().to_string()
            );
            assert_eq!(
                value(&all, "ipamctl_supernet_largest_free_addresses", &labels),
                (1u128 << (128 - largest.prefix_len())).to_string()
            );
            let blocks = status["freeBlocks"].as_array().expect("freeBlocks");
            assert!(!blocks.is_empty());
            for b in blocks {
                let labels = format!("{labels},length=\"{}\"", b["length"]);
                assert_eq!(
                    value(&all, "ipamctl_supernet_free_blocks", &labels),
                    count(&b["count"])
                );
            }
        } else {
            addresses += 1;
            same_usage(&all, "pool", &labels, status);
        }
        let cooling = if pool["metadata"]["name"] == "cool4" {
            "1"
        } else {
            "0"
        };
        assert_eq!(
            value(&all, "ipamctl_pool_cooldown_records", &labels),
            cooling,
            "{labels}"
        );
    }
    assert_eq!((addresses, supernets), (11, 1));
    // One sample per pool, none for anything else.
    assert_eq!(all["ipamctl_pool_capacity_addresses"].len(), 11);
    assert_eq!(all["ipamctl_pool_cooldown_records"].len(), 12);
    // Above 2^53 the count is written exactly (Prometheus rounds it, not ipamctl).
    assert_eq!(
        value(
            &all,
            "ipamctl_pool_capacity_addresses",
            "namespace=\"\",pool=\"public-v6\",family=\"ipv6\",zone=\"zone-a\""
        ),
        "18446744073709551611"
    );
    let subnets = list_items(
        &ran.then()
            .args(["subnet", "list", "-o", "json"])
            .run()
            .stdout,
    );
    assert_eq!(subnets.len(), 3);
    let web6 =
        "namespace=\"acme/prod\",pool=\"vpc-main-v6\",subnet=\"web6\",family=\"ipv6\",zone=\"\"";
    let cool = |name: &str| {
        format!("namespace=\"\",pool=\"cool4\",subnet=\"{name}\",family=\"ipv4\",zone=\"zone-b\"")
    };
    for s in &subnets {
        let labels = match s["metadata"]["name"].as_str() {
            Some("web6") => web6.to_owned(),
            Some(name) => cool(name),
            None => panic!("a subnet without a name: {s}"),
        };
        same_usage(&all, "subnet", &labels, &s["status"]);
    }
    assert_eq!(value(&all, "ipamctl_subnet_allocated_addresses", web6), "2");
    assert_eq!(all["ipamctl_subnet_capacity_addresses"].len(), 3);
    // A subnet counts the cooldown records of its own addresses: FloatingIP/a's 192.0.2.1.
    for (labels, cooling) in [
        (web6.to_owned(), "0"),
        (cool("cool-low"), "1"),
        (cool("cool-high"), "0"),
    ] {
        assert_eq!(
            value(&all, "ipamctl_subnet_cooldown_records", &labels),
            cooling,
            "{labels}"
        );
    }
    // Without `--check`, no check figures (they cost a read of every manifest).
    assert!(!text.contains("ipamctl_check_problems"));
}

#[test]
fn metrics_of_one_namespace_are_its_pools_and_subnets_alone() {
    let ran = state().args(["metrics", "-n", "acme/prod"]).run();
    let all = samples(&ran.stdout);
    assert_eq!(all["ipamctl_pool_capacity_addresses"].len(), 4);
    for series in all.values().flat_map(|m| m.keys()) {
        assert!(series.starts_with("namespace=\"acme/prod\""), "{series}");
    }
}

#[test]
fn the_same_state_gives_the_same_bytes() {
    let ran = state().args(["metrics", "--check"]).run();
    let first = ran.stdout.clone();
    let again = ran.then().args(["metrics", "--check"]).run();
    assert_eq!(again.stdout, first);
}

#[test]
#[cfg_attr(
    not(has_promtool),
    ignore = "needs promtool: apt-get install prometheus"
)]
fn promtool_accepts_the_exposition() {
    let ran = state().args(["metrics", "--check"]).run();
    assert!(
        ran.stdout
            .contains("ipamctl_check_problems{severity=\"error\"} 0")
    );
    promtool(&["check", "metrics"], &ran.stdout);
}

/// A quota on `acme/prod` of `dual-stack` plus [`EXTRA`]'s claims: 10 addresses, 2 prefixes.
const QUOTA: &str = r#"apiVersion: pivirt.hu/v1
kind: Quota
metadata: {name: tenant, namespace: acme/prod}
spec: {hard: {addresses: 10, prefixes: 2}}
"#;

#[test]
#[cfg_attr(
    not(has_promtool),
    ignore = "needs promtool: apt-get install prometheus"
)]
fn quota_used_and_limit_are_gauges_promtool_accepts_counted_as_list_counts() {
    let test = state();
    let file = test.input("quota.yaml", QUOTA);
    let test = test.args(["apply", "-f", &file]).run().then();
    // What the namespace holds, counted by `list` (every allocation of its pools).
    let listed = test.args(["list", "-n", "acme/prod", "-o", "json"]).run();
    let held = list_items(&listed.stdout).len();
    assert!(held > 0, "the namespace holds addresses");
    let ran = listed.then().args(["metrics"]).run();
    promtool(&["check", "metrics"], &ran.stdout);
    for line in [
        "# TYPE ipamctl_quota_used gauge",
        "# TYPE ipamctl_quota_limit gauge",
        "# HELP ipamctl_quota_used ",
        "# HELP ipamctl_quota_limit ",
    ] {
        assert!(ran.stdout.contains(line), "no `{line}` in:\n{}", ran.stdout);
    }
    let all = samples(&ran.stdout);
    let labels =
        |resource: &str| format!(r#"namespace="acme/prod",quota="tenant",resource="{resource}""#);
    let used = &all["ipamctl_quota_used"];
    let limit = &all["ipamctl_quota_limit"];
    assert_eq!(used[&labels("addresses")], held.to_string());
    assert_eq!(limit[&labels("addresses")], "10");
    assert_eq!(used[&labels("prefixes")], "0");
    assert_eq!(limit[&labels("prefixes")], "2");
    // One sample per ceiling: floatingIPs has none, so neither metric has it.
    assert_eq!((used.len(), limit.len()), (2, 2), "{used:?} {limit:?}");
}

/// The first `yaml` block after `heading` (a `## ` line) of `text`.
fn yaml_block(text: &str, heading: &str) -> String {
    let section = text
        .split(&format!("\n{heading}\n"))
        .nth(1)
        .unwrap_or_else(|| panic!("no `{heading}` section"));
    let block = section
        .split("\n```yaml\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no yaml block in `{heading}`"));
    block.split("\n```").next().expect("its end").to_owned() + "\n"
}

/// The README's alerting rules (the `yaml` block of its metrics section).
fn readme_rules() -> String {
    yaml_block(&book::text(), "## Metrics to alert on")
}

#[test]
#[cfg_attr(
    not(has_promtool),
    ignore = "needs promtool: apt-get install prometheus"
)]
fn the_readme_alerting_rules_pass_promtool_and_fire_before_a_pool_or_a_subnet_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("ipamctl-rules.yaml");
    std::fs::write(&rules, readme_rules()).unwrap();
    promtool(&["check", "rules", rules.to_str().unwrap()], "");
    // The rules fire on series shaped as `ipamctl metrics` writes them: a pool 95% full
    // fires the threshold alert, one losing 10 addresses a minute with 200 left fires the
    // forecast, and a pool at rest fires neither.
    let labels = r#"namespace="acme/prod",pool="vpc-main",family="ipv4",zone="""#;
    let quiet = r#"namespace="",pool="quiet",family="ipv4",zone="""#;
    // A VPC's /16 pool with room to spare and its /24 subnet `db` running out: only the
    // subnet's rules fire.
    let subnet = r#"namespace="acme/prod",pool="vpc-main",subnet="db",family="ipv4",zone="""#;
    let tests = format!(
        r#"rule_files: [ipamctl-rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'ipamctl_pool_capacity_addresses{{{labels}}}'
        values: '1000x60'
      - series: 'ipamctl_pool_free_addresses{{{labels}}}'
        values: '50x60'
      - series: 'ipamctl_pool_cooldown_records{{{labels}}}'
        values: '0x60'
      - series: 'ipamctl_pool_capacity_addresses{{{quiet}}}'
        values: '1000x60'
      - series: 'ipamctl_pool_free_addresses{{{quiet}}}'
        values: '800x60'
      - series: 'ipamctl_pool_cooldown_records{{{quiet}}}'
        values: '0x60'
    alert_rule_test:
      - eval_time: 30m
        alertname: IpamctlPoolNearlyFull
        exp_alerts:
          - exp_labels: {{severity: warning, {}}}
            exp_annotations:
              summary: "pool vpc-main in namespace 'acme/prod' has 50 free addresses left"
  - interval: 1m
    input_series:
      - series: 'ipamctl_pool_capacity_addresses{{{labels}}}'
        values: '1000x90'
      - series: 'ipamctl_pool_free_addresses{{{labels}}}'
        values: '800-10x90'
      - series: 'ipamctl_pool_cooldown_records{{{labels}}}'
        values: '0x90'
    alert_rule_test:
      - eval_time: 60m
        alertname: IpamctlPoolRunsOutSoon
        exp_alerts:
          - exp_labels: {{severity: critical, {}}}
            exp_annotations:
              summary: "pool vpc-main in namespace 'acme/prod' runs out within a day at this rate"
  - interval: 1m
    input_series:
      - series: 'ipamctl_pool_capacity_addresses{{{labels}}}'
        values: '65534x90'
      - series: 'ipamctl_pool_free_addresses{{{labels}}}'
        values: '65400-2x90'
      - series: 'ipamctl_pool_cooldown_records{{{labels}}}'
        values: '0x90'
      - series: 'ipamctl_subnet_capacity_addresses{{{subnet}}}'
        values: '253x90'
      - series: 'ipamctl_subnet_free_addresses{{{subnet}}}'
        values: '60-0.5x90'
      - series: 'ipamctl_subnet_cooldown_records{{{subnet}}}'
        values: '0x90'
    alert_rule_test:
      - eval_time: 90m
        alertname: IpamctlPoolNearlyFull
        exp_alerts: []
      - eval_time: 90m
        alertname: IpamctlPoolRunsOutSoon
        exp_alerts: []
      - eval_time: 90m
        alertname: IpamctlSubnetNearlyFull
        exp_alerts:
          - exp_labels: {{severity: warning, {}}}
            exp_annotations:
              summary: "subnet db of pool vpc-main in namespace 'acme/prod' has 15 free addresses left"
      - eval_time: 60m
        alertname: IpamctlSubnetRunsOutSoon
        exp_alerts:
          - exp_labels: {{severity: critical, {}}}
            exp_annotations:
              summary: "subnet db of pool vpc-main in namespace 'acme/prod' runs out within a day at this rate"
"#,
        yaml_labels(labels),
        yaml_labels(labels),
        yaml_labels(subnet),
        yaml_labels(subnet),
    );
    let file = dir.path().join("tests.yaml");
    std::fs::write(&file, tests).unwrap();
    promtool(&["test", "rules", file.to_str().unwrap()], "");
}

/// `a="b",c=""` as YAML flow-mapping entries `a: "b"`, without the empty ones (an empty
/// label is no label to Prometheus).
fn yaml_labels(labels: &str) -> String {
    labels
        .split(',')
        .filter(|kv| !kv.ends_with("=\"\""))
        .map(|kv| kv.replacen('=', ": ", 1))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn out_replaces_the_file_whole_and_readable_by_everyone() {
    use std::os::unix::fs::PermissionsExt;
    let test = state();
    std::fs::create_dir(test.root().join("textfile")).unwrap();
    std::fs::write(test.root().join("textfile/ipamctl.prom"), "old\n").unwrap();
    let ran = test
        .args(["metrics", "--out", "textfile/ipamctl.prom"])
        .stdout("")
        .run();
    let written = std::fs::read_to_string(ran.root().join("textfile/ipamctl.prom")).unwrap();
    let mode = std::fs::metadata(ran.root().join("textfile/ipamctl.prom"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    let names: Vec<_> = std::fs::read_dir(ran.root().join("textfile"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["ipamctl.prom"], "no temporary file left beside it");
    let printed = ran.then().args(["metrics"]).run();
    assert_eq!(written, printed.stdout);
}

#[test]
fn out_into_a_missing_directory_is_one_error_and_writes_nothing() {
    let ran = state()
        .args(["metrics", "--out", "nowhere/ipamctl.prom"])
        .fails(code::FAILURE)
        .run();
    assert!(ran.stderr.contains("nowhere"), "{}", ran.stderr);
    assert!(!ran.root().join("nowhere").exists());
}

#[test]
fn metrics_print_text_only() {
    Test::new("seed")
        .args(["metrics", "-o", "json"])
        .fails(code::INVALID)
        .run();
}

#[test]
fn check_problems_are_checks_findings_by_severity() {
    let ran = Test::new("broken-allocation")
        .file_store_only()
        .args(["metrics", "--check"])
        .run();
    let all = samples(&ran.stdout);
    let findings = ran
        .then()
        .args(["check", "-o", "json"])
        .status(code::FAILURE)
        .run();
    let findings = list_items(&findings.stdout);
    for severity in ["error", "warning"] {
        let n = findings
            .iter()
            .filter(|f| f["severity"] == severity)
            .count();
        assert_eq!(
            value(
                &all,
                "ipamctl_check_problems",
                &format!("severity=\"{severity}\"")
            ),
            n.to_string()
        );
    }
    assert!(value(&all, "ipamctl_check_problems", "severity=\"error\"") != "0");
}

/// The alerting rule of the quotas page (the `yaml` block of its metrics section).
fn quota_rules() -> String {
    let page = std::fs::read_to_string(book::root().join("docs/src/quotas.md")).unwrap();
    yaml_block(&page, "## Metrics, and an alert at 90 %")
}

#[test]
#[cfg_attr(
    not(has_promtool),
    ignore = "needs promtool: apt-get install prometheus"
)]
fn the_quota_alert_rule_passes_promtool_and_fires_at_90_percent_of_a_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("ipamctl-quota-rules.yaml");
    std::fs::write(&rules, quota_rules()).unwrap();
    promtool(&["check", "rules", rules.to_str().unwrap()], "");
    // Series shaped as `ipamctl metrics` writes them: 9 of 10 addresses fires, 8 of 10
    // floating IPs does not.
    let full = r#"namespace="shop/prod",quota="default",resource="addresses""#;
    let room = r#"namespace="shop/prod",quota="default",resource="floatingIPs""#;
    let tests = format!(
        r#"rule_files: [ipamctl-quota-rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'ipamctl_quota_used{{{full}}}'
        values: '9x30'
      - series: 'ipamctl_quota_limit{{{full}}}'
        values: '10x30'
      - series: 'ipamctl_quota_used{{{room}}}'
        values: '8x30'
      - series: 'ipamctl_quota_limit{{{room}}}'
        values: '10x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: IpamctlQuotaNearlyUsed
        exp_alerts:
          - exp_labels: {{severity: warning, {}}}
            exp_annotations:
              summary: "namespace 'shop/prod' holds 9 addresses, 90 % or more of quota default"
"#,
        yaml_labels(full),
    );
    let file = dir.path().join("tests.yaml");
    std::fs::write(&file, tests).unwrap();
    promtool(&["test", "rules", file.to_str().unwrap()], "");
}
