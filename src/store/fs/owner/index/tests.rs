//! The owner index's file format: rendering, parsing, and what a record vouches for.

// By its path, not `super::*`: the same items, named as the layer check reads paths.
use crate::store::fs::owner::index::line::parse_i64;
use crate::store::fs::owner::index::*;

fn record(ino: u64, owner: &str) -> Record {
    Record {
        stamp: Stamp {
            ino,
            size: 200,
            mtime: 1_700_000_000_123_456_789,
            ctime: 1_700_000_000_123_456_789,
        },
        owner: owner.into(),
        whole: ino.is_multiple_of(2),
        created: ino.is_multiple_of(4).then_some(1_796_108_400 + ino),
    }
}

const WEB: &str = "VirtualMachine web-01/0 0f8fad5b-d9cb-469f-a165-70867728950e";

fn records(index: &Index) -> Vec<(IpAddr, Record)> {
    index
        .entries
        .iter()
        .map(|e| {
            let r = index.record(e);
            let owner = r.owner.into();
            (
                e.address,
                Record {
                    stamp: r.stamp,
                    owner,
                    whole: r.whole,
                    created: r.created,
                },
            )
        })
        .collect()
}

#[test]
fn renders_and_parses_back_with_appended_changes() {
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let b: IpAddr = "10.0.0.2".parse().unwrap();
    let c: IpAddr = "10.0.0.3".parse().unwrap();
    let start = [
        Change::Set(b, record(12, WEB)),
        Change::Set(a, record(11, "FloatingIP fip-1 -")),
    ];
    let mut text = Index::empty(2049).render_with(&start);
    assert!(text.starts_with("ipamctl-index 4 2049\n10.0.0.1 11 "));
    let changes = [
        Change::Forget(a),
        Change::Set(b, record(13, WEB)),
        Change::Set(c, record(14, WEB)),
        Change::Set(c, record(15, WEB)),
    ];
    text.push_str(&Index::render_changes(&changes));
    let parsed = Index::parse(text.clone().into_bytes(), 2049);
    assert_eq!(parsed.lines, 6);
    let want = vec![(b, record(13, WEB)), (c, record(15, WEB))];
    assert_eq!(records(&parsed), want);
    assert_eq!(parsed.get(b).map(|r| r.owner), Some(WEB));
    assert_eq!(parsed.get(a), None);
    // Rewritten whole, the same records in address order and nothing else.
    let rewritten = Index::parse(
        Index::<IpAddr>::parse(text.into_bytes(), 2049)
            .render_with(&[])
            .into_bytes(),
        2049,
    );
    assert_eq!(records(&rewritten), want);
    assert_eq!(rewritten.lines, 2);
    let merged = Index::parse(
        rewritten
            .render_with(&[Change::Set(a, record(16, WEB)), Change::Forget(c)])
            .into_bytes(),
        2049,
    );
    assert_eq!(
        records(&merged),
        vec![(a, record(16, WEB)), (b, record(13, WEB))]
    );
}

#[test]
fn another_device_or_a_broken_line_is_ignored() {
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let text = Index::empty(1).render_with(&[Change::Set(a, record(11, "FloatingIP fip-1 -"))]);
    let index = Index::parse(text.clone().into_bytes(), 1);
    assert_eq!(index.len(), 1);
    assert!(Index::<IpAddr>::parse(text.clone().into_bytes(), 2).is_empty());
    for torn in [
        "10.0.0.2 13 200 17000\n",
        "10.0.0.1 - x\n",
        // A last line without its newline is an append cut short.
        "10.0.0.1 -",
        "10.0.0.2 13 200 1 1 w FloatingIP fip-2 -",
    ] {
        let parsed = Index::parse(format!("{text}{torn}").into_bytes(), 1);
        assert_eq!(records(&parsed), records(&index), "{torn}");
    }
    // An owner of two or four fields is kept, but vouches for nothing: every filter
    // wants the file read.
    let only = OwnerFilter::new(Some("FloatingIP/other"), None).unwrap();
    // The last is an append cut short and the next append joined to it.
    let joined = "FloatingIP fi10.0.0.3 14 200 1 1 w FloatingIP fip-3 -";
    for owner in ["FloatingIP x", "FloatingIP x - y", "FloatingIP  -", joined] {
        let head = "10.0.0.2 13 200 1 1 -";
        let sealed = seal(head.as_bytes(), owner.as_bytes());
        let parsed = Index::<IpAddr>::parse(
            format!("{text}{head} {sealed:016x} {owner}\n").into_bytes(),
            1,
        );
        let r = parsed.get("10.0.0.2".parse().unwrap()).unwrap();
        assert!(text_matches(r.owner, &only), "{owner}");
        assert_eq!(parse_owner(r.owner), None, "{owner}");
    }
}

/// A line whose owner (or status) was edited by hand, its seal not made again, vouches
/// for nothing: the key has no record, so its file is read.
#[test]
fn an_edited_line_vouches_for_nothing() {
    let a: IpAddr = "10.0.0.1".parse().unwrap();
    let text = Index::empty(1).render_with(&[Change::Set(a, record(11, WEB))]);
    assert_eq!(
        Index::<IpAddr>::parse(text.clone().into_bytes(), 1).len(),
        1
    );
    for edited in [
        text.replace(WEB, "FloatingIP fip-1 -"),
        text.replace(" 11 ", " 12 "),
    ] {
        assert_ne!(edited, text);
        let parsed = Index::<IpAddr>::parse(edited.into_bytes(), 1);
        assert!(parsed.get(a).is_none());
    }
}

/// A prefix claims index keys its records by prefix: written as `Display` writes it and
/// read back only in that spelling (no host bits, a length in range).
#[test]
fn prefix_keys_render_and_parse_back() {
    let a: ipnet::IpNet = "2001:db8::/64".parse().unwrap();
    let b: ipnet::IpNet = "10.0.0.0/24".parse().unwrap();
    let text = Index::empty(7).render_with(&[
        Change::Set(a, record(11, WEB)),
        Change::Set(b, record(12, WEB)),
    ]);
    assert!(text.contains("\n2001:db8::/64 11 "), "{text}");
    let parsed = Index::<ipnet::IpNet>::parse(text.into_bytes(), 7);
    assert_eq!(parsed.len(), 2);
    assert_eq!(parsed.get(a).map(|r| r.owner), Some(WEB));
    assert_eq!(parsed.join(&[b]).1, vec![a]);
    for bad in [
        &b"10.0.0.1/24"[..],
        b"10.0.0.0/33",
        b"10.0.0.0",
        b"10.0.0.0/",
        b"/24",
    ] {
        assert_eq!(<ipnet::IpNet as Key>::parse(bad), None, "{bad:?}");
    }
}

#[test]
fn owner_text_matches_filters() {
    let owner = Owner::parse("VirtualMachine/web-01/0", None).unwrap();
    let text = owner_text(&owner);
    assert_eq!(text, "VirtualMachine web-01/0 -");
    let prefix = OwnerFilter::new(Some("VirtualMachine/web-01/"), None).unwrap();
    let other = OwnerFilter::new(Some("VirtualMachine/web-011/0"), None).unwrap();
    assert!(text_matches(&text, &prefix));
    assert!(!text_matches(&text, &other));
    assert_eq!(parse_owner(&text), Some(owner));
    assert_eq!(parse_owner("VirtualMachine web-01 -"), None);
}

#[test]
fn numbers_parse_byte_wise_and_strictly() {
    assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse_u64(b"18446744073709551616"), None);
    assert_eq!(parse_u64(b""), None);
    assert_eq!(parse_u64(b"1x"), None);
    assert_eq!(parse_i64(b"-5"), Some(-5));
    assert_eq!(parse_address(b"10.0.0.255"), "10.0.0.255".parse().ok());
    for bad in [
        &b"10.0.0"[..],
        b"10.0.0.256",
        b"10.0.0.01",
        b"10.0.0.1.2",
        b"",
    ] {
        assert_eq!(parse_address(bad), None);
    }
}

/// Whole-second stamps (ext4 with 128-byte inodes) may hide a change up to a second
/// later: such a file is recorded only once it is older than two seconds and the margin.
#[test]
fn whole_second_stamps_take_the_coarse_margin() {
    let mut s = record(1, WEB).stamp;
    s.ctime = 1_700_000_000_000_000_000;
    s.mtime = 1_700_000_000_000_000_000;
    assert_eq!(s.margin(), COARSE_NS);
    assert!(!s.settled(s.ctime + 999_999_999));
    assert!(!s.settled(s.ctime + COARSE_NS));
    assert!(s.settled(s.ctime + COARSE_NS + 1));
    assert!(s.changed_within(s.ctime + 2_400_000_000, 500_000_000));
    assert!(!s.changed_within(s.ctime + 2_600_000_001, 500_000_000));
    s.mtime += 1;
    assert_eq!(s.margin(), RACY_NS);
}

#[test]
fn a_change_in_the_same_tick_as_the_read_is_never_recorded() {
    let s = record(1, WEB).stamp;
    assert!(!s.settled(s.ctime));
    assert!(!s.settled(s.ctime + RACY_NS));
    assert!(s.settled(s.ctime + RACY_NS + 1));
}
