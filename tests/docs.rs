//! The committed man pages under `man/` must match what the clap definitions generate.
//! Regenerate with `IPAMCTL_BLESS=1 cargo test --test docs`.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

#[test]
fn man_pages_are_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("man");
    let pages = ipamctl::docs::man_pages();
    if std::env::var_os("IPAMCTL_BLESS").is_some() {
        fs::create_dir_all(&dir).unwrap();
        for entry in fs::read_dir(&dir).unwrap() {
            fs::remove_file(entry.unwrap().path()).unwrap();
        }
        for (name, bytes) in &pages {
            fs::write(dir.join(name), bytes).unwrap();
        }
    }
    let committed: BTreeSet<String> = fs::read_dir(&dir)
        .expect("man/ exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let generated: BTreeSet<String> = pages.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        committed, generated,
        "man/ holds other pages than the CLI has; run IPAMCTL_BLESS=1 cargo test --test docs"
    );
    for (name, bytes) in &pages {
        let on_disk = fs::read(dir.join(name)).unwrap();
        assert!(
            on_disk == *bytes,
            "man/{name} is stale; run IPAMCTL_BLESS=1 cargo test --test docs"
        );
    }
    assert!(generated.contains("ipamctl-allocate.1") && generated.contains("ipamctl-pool-list.1"));
}

#[test]
fn top_page_documents_the_exit_codes() {
    let (_, top) = ipamctl::docs::man_pages()
        .into_iter()
        .find(|(n, _)| n == "ipamctl.1")
        .unwrap();
    let text = String::from_utf8(top).unwrap();
    for line in [
        "invalid usage or input",
        "not found (state directory, pool)",
        "pool exhausted",
    ] {
        assert!(text.contains(line), "ipamctl.1 lacks `{line}`");
    }
}
