//! The SVG map as a picture, rendered by a real SVG renderer (resvg, with the system's
//! fonts): every text element lies inside the canvas, whatever the prefix size or pool
//! name length; the legend's swatches come out in distinct colours; the shades of /24s
//! darken step by step with enough contrast between neighbours, and an empty one stands out
//! from the page; each allocated cell's tooltip names its owner, and a subnet's gateway and
//! reserved addresses are drawn as such; a large IPv6 pool is one cell per subnet and per /64
//! in use, with its counts written beside it.

mod common;

use std::collections::BTreeMap;

use common::Test;
use resvg::{tiny_skia, usvg};

/// The longest pool name there can be (an RFC 1123 label).
const LONG: &str = "a-pool-with-the-longest-name-a-pool-can-have-sixty-three-chars0";

fn pool(name: &str, cidr: &str, extra: &str) -> String {
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\nspec:\n  cidr: {cidr}\n  kind: public\n{extra}"
    )
}

/// A state with `manifest` applied.
fn with_pool(manifest: &str) -> Test {
    let test = Test::new("empty");
    test.args(["apply", "-f", "-"]).stdin(manifest).run().then()
}

fn draw(test: Test, args: &[&str]) -> (String, Test) {
    let mut full = vec!["pool", "show"];
    full.extend_from_slice(args);
    full.extend(["--map", "-o", "svg"]);
    let ran = test.args(&full).run();
    (ran.stdout.clone(), ran.then())
}

/// Parses and renders `svg`; checks that every text element lies inside the canvas.
fn render(svg: &str, what: &str) -> tiny_skia::Pixmap {
    let mut opt = usvg::Options::default();
    opt.fontdb_mut().load_system_fonts();
    // The generic `monospace` as the system's first monospaced family, as a browser
    // would pick one (fontdb's default, Courier New, is rarely installed).
    let mono = opt
        .fontdb
        .faces()
        .find(|f| f.monospaced)
        .and_then(|f| f.families.first())
        .map(|(name, _)| name.clone())
        .expect("no monospaced font to render text with: apt-get install fonts-dejavu-core");
    opt.fontdb_mut().set_monospace_family(mono);
    let tree = usvg::Tree::from_str(svg, &opt).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (w, h) = (tree.size().width(), tree.size().height());
    let mut boxes = Vec::new();
    texts(tree.root(), &mut boxes);
    let doc = roxmltree::Document::parse(svg).expect("well-formed");
    let written = doc.descendants().filter(|n| n.has_tag_name("text")).count();
    assert_eq!(
        boxes.len(),
        written,
        "{what}: a text element was not laid out"
    );
    for (text, b) in &boxes {
        assert!(
            b.left() >= 0.0 && b.top() >= 0.0 && b.right() <= w && b.bottom() <= h,
            "{what}: `{text}` at {b:?} leaves the {w}x{h} canvas"
        );
    }
    let mut pixmap = tiny_skia::Pixmap::new(w.ceil() as u32, h.ceil() as u32).expect("a canvas");
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap
}

fn texts(group: &usvg::Group, out: &mut Vec<(String, usvg::Rect)>) {
    for node in group.children() {
        match node {
            usvg::Node::Text(t) => {
                let text: String = t.chunks().iter().map(|c| c.text()).collect();
                out.push((text, t.abs_bounding_box()));
            }
            usvg::Node::Group(g) => texts(g, out),
            _ => {}
        }
    }
}

/// The rendered colour at the centre of each legend swatch, by kind.
fn swatches(svg: &str, pixmap: &tiny_skia::Pixmap) -> BTreeMap<String, [u8; 3]> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed");
    let num = |n: &roxmltree::Node, a: &str| -> u32 {
        n.attribute(a)
            .expect("a swatch has a position")
            .parse::<f64>()
            .expect("a number") as u32
    };
    doc.descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter_map(|n| {
            let kind = n.attribute("class")?.strip_prefix("swatch ")?.to_owned();
            let (x, y, size) = (num(&n, "x"), num(&n, "y"), num(&n, "width"));
            let p = pixmap
                .pixel(x + size / 2, y + size / 2)
                .expect("the swatch is on the canvas");
            Some((kind, [p.red(), p.green(), p.blue()]))
        })
        .collect()
}

/// WCAG relative luminance.
fn luminance([r, g, b]: [u8; 3]) -> f64 {
    let c = |v: u8| {
        let v = f64::from(v) / 255.0;
        if v <= 0.03928 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * c(r) + 0.7152 * c(g) + 0.0722 * c(b)
}

#[track_caller]
fn distinct(colours: &BTreeMap<String, [u8; 3]>, what: &str) {
    let mut seen: Vec<&[u8; 3]> = colours.values().collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen.len(),
        colours.len(),
        "{what}: two swatches look alike: {colours:?}"
    );
}

#[test]
#[cfg_attr(
    not(has_fonts),
    ignore = "needs a monospaced font: apt-get install fonts-dejavu-core"
)]
fn an_address_map_keeps_its_text_inside_and_names_each_holder() {
    let manifest = pool(
        LONG,
        "192.0.2.0/26",
        "  gateway: 192.0.2.1\n  exclude: [192.0.2.48/30]\n",
    );
    let mut test = with_pool(&manifest);
    for (a, owner) in [
        ("192.0.2.3", "FloatingIP/lab-3"),
        ("192.0.2.40", "VPC/router"),
    ] {
        test = test
            .args([
                "allocate",
                LONG,
                "--owner",
                owner,
                "--address",
                a,
                "--uid",
                "00000000-0000-4000-8000-000000000001",
            ])
            .run()
            .then();
    }
    let (svg, _) = draw(test, &[LONG]);
    let pixmap = render(&svg, "a /26 with a long name");
    let colours = swatches(&svg, &pixmap);
    assert_eq!(colours.len(), 6, "{colours:?}");
    distinct(&colours, "address kinds");
    assert!(
        svg.contains("<title>192.0.2.40 allocated to VPC/router (uid 00000000-0000-4000-8000-000000000001)</title>"),
        "the tooltip names the holder"
    );
}

#[test]
#[cfg_attr(
    not(has_fonts),
    ignore = "needs a monospaced font: apt-get install fonts-dejavu-core"
)]
fn a_tiny_pool_with_a_long_name_is_not_clipped() {
    let (svg, _) = draw(with_pool(&pool(LONG, "198.51.100.4/30", "")), &[LONG]);
    render(&svg, "a /30 with a long name");
}

#[test]
#[cfg_attr(
    not(has_fonts),
    ignore = "needs a monospaced font: apt-get install fonts-dejavu-core"
)]
fn the_shades_of_a_large_pool_darken_in_distinct_steps() {
    // A /20: sixteen /24s. Block 0 stays empty; blocks 1 to 5 keep 16 candidates each
    // (.192 to .255) and get 1, 8, 32, 60 and 64 of them allocated (a step each: under 5%,
    // 5% to 20%, 20% to 80%, 80% or more, full); block 6 has none.
    let mut exclude = Vec::new();
    for b in 1..=5 {
        for tail in ["0/25", "128/26"] {
            exclude.push(format!("10.0.{b}.{tail}"));
        }
    }
    exclude.push("10.0.6.0/24".into());
    let manifest = pool(
        "big",
        "10.0.0.0/20",
        &format!("  exclude: [{}]\n", exclude.join(", ")),
    );
    let test = with_pool(&manifest);
    let name = ipamctl::model::PoolName::new("big").expect("valid");
    for (block, held) in [(1u32, 1u32), (2, 8), (3, 32), (4, 60), (5, 64)] {
        for i in 0..held {
            let address =
                std::net::IpAddr::from(std::net::Ipv4Addr::from(0x0a00_00c0 + (block << 8) + i));
            let owner = ipamctl::model::Owner::parse(&format!("FloatingIP/f-{block}-{i}"), None)
                .expect("valid");
            let m = ipamctl::model::AllocationManifest::new(&name, None, address, owner);
            let file = ipamctl::model::allocation_name(&name, address);
            test.write(
                &format!("cluster/ipallocations/{file}.yaml"),
                &ipamctl::yaml::encode(&m),
            );
        }
    }
    let (svg, test) = draw(test, &["big"]);
    let pixmap = render(&svg, "a /20 of /24s");
    let colours = swatches(&svg, &pixmap);
    distinct(&colours, "shades");
    let ramp = ["empty", "shade-1", "shade-2", "shade-3", "shade-4", "full"];
    for pair in ramp.windows(2) {
        let (a, b) = (luminance(colours[pair[0]]), luminance(colours[pair[1]]));
        assert!(a > b, "{pair:?} do not darken");
        let contrast = (a + 0.05) / (b + 0.05);
        assert!(
            contrast >= 1.5,
            "{pair:?}: contrast {contrast:.2} as rendered"
        );
    }
    // Every shade is on the map, once per block that has it.
    let cells = |class: &str| svg.matches(&format!("class=\"cell {class}\"")).count();
    assert_eq!(
        ramp.map(cells),
        [10, 1, 1, 1, 1, 1],
        "one block of each shade, the rest empty"
    );
    assert_eq!(cells("no-candidates"), 1);
    // One subnet of it, address by address.
    let (svg, _) = draw(test, &["big", "--within", "10.0.5.0/24"]);
    render(&svg, "a /24 within a /20");
}

/// Runs `ipamctl ARGS` on `test`'s state; the state for the next command.
fn step(test: Test, args: &[&str]) -> Test {
    test.args(args).run().then()
}

/// The `x`, `y` and `width` of the first `<rect>` whose class is `class`, as whole pixels.
fn first_rect(svg: &str, class: &str) -> (u32, u32, u32) {
    let doc = roxmltree::Document::parse(svg).expect("well-formed");
    let n = doc
        .descendants()
        .find(|n| n.has_tag_name("rect") && n.attribute("class") == Some(class))
        .unwrap_or_else(|| panic!("no rect of class `{class}`"));
    let num = |a: &str| {
        n.attribute(a)
            .expect("a position")
            .parse::<f64>()
            .expect("a number")
    };
    (num("x") as u32, num("y") as u32, num("width").ceil() as u32)
}

/// WCAG contrast ratio of two rendered colours.
fn contrast(a: [u8; 3], b: [u8; 3]) -> f64 {
    let (a, b) = (luminance(a), luminance(b));
    (a.max(b) + 0.05) / (a.min(b) + 0.05)
}

#[test]
#[cfg_attr(
    not(has_fonts),
    ignore = "needs a monospaced font: apt-get install fonts-dejavu-core"
)]
fn an_empty_slash_24_stands_out_from_the_page() {
    let (svg, _) = draw(with_pool(&pool("big", "10.0.0.0/20", "")), &["big"]);
    let pixmap = render(&svg, "an empty /20");
    let at = |x: u32, y: u32| {
        let p = pixmap.pixel(x, y).expect("on the canvas");
        [p.red(), p.green(), p.blue()]
    };
    let page = at(1, 1);
    let (x, y, size) = first_rect(&svg, "cell empty");
    let centre = at(x + size / 2, y + size / 2);
    // The darkest pixel of the cell: its outline, if it has one.
    let darkest = (x..x + size)
        .flat_map(|px| (y..y + size).map(move |py| (px, py)))
        .map(|(px, py)| at(px, py))
        .min_by(|a, b| luminance(*a).total_cmp(&luminance(*b)))
        .expect("a cell has pixels");
    assert!(
        contrast(centre, page) >= 1.1,
        "an empty cell's fill {centre:?} is nearly the page's {page:?}"
    );
    assert!(
        contrast(darkest, page) >= 3.0,
        "an empty cell {darkest:?} cannot be told from the page {page:?}: contrast {:.2}",
        contrast(darkest, page)
    );
}

#[test]
#[cfg_attr(
    not(has_fonts),
    ignore = "needs a monospaced font: apt-get install fonts-dejavu-core"
)]
fn a_subnets_gateway_and_reserved_addresses_are_drawn_as_such_never_free() {
    let test = step(
        with_pool(&pool("lab", "10.42.0.0/16", "")),
        &[
            "subnet",
            "create",
            "web",
            "--pool",
            "lab",
            "--cidr",
            "10.42.1.0/28",
            "--reserved",
            "10.42.1.2",
        ],
    );
    let (svg, test) = draw(test, &["lab", "--within", "10.42.0.0/22"]);
    render(&svg, "a /22 with a subnet");
    for tip in [
        "<title>10.42.1.1 gateway of subnet web</title>",
        "<title>10.42.1.2 reserved address of subnet web</title>",
        "<title>10.42.1.0 network/broadcast address of subnet web</title>",
        "<title>10.42.1.15 network/broadcast address of subnet web</title>",
        "<title>10.42.1.3 free</title>",
    ] {
        assert!(svg.contains(tip), "no {tip}");
    }
    // The pool's usage leaves out the four addresses the subnet keeps.
    assert!(
        svg.contains("pool 10.42.0.0/16: 65530 candidates, 0 allocated, 65530 free (0.0% used)"),
        "{svg}"
    );
    let (svg, _) = draw(test, &["lab"]);
    // The /24 that holds the subnet is outlined and names it.
    assert!(
        svg.contains(
            r#"class="cell empty in-subnet" x="132.5" y="28.5" width="9" height="9"><title>10.42.1.0/24: 0 of 252 candidates allocated; holds subnet web</title>"#
        ),
        "{svg}"
    );
}

#[test]
#[cfg_attr(
    not(has_fonts),
    ignore = "needs a monospaced font: apt-get install fonts-dejavu-core"
)]
fn a_large_ipv6_pool_is_one_cell_per_subnet_and_per_slash_64_in_use_with_its_count() {
    let mut test = with_pool(&pool("six", "fd00:103::/48", ""));
    for (name, cidr) in [("web6", "fd00:103:0:1::/64"), ("db6", "fd00:103:0:2::/64")] {
        test = step(
            test,
            &["subnet", "create", name, "--pool", "six", "--cidr", cidr],
        );
    }
    for i in 0..3 {
        let owner = format!("VirtualMachine/web-{i}/0");
        test = step(
            test,
            &["allocate", "six", "--owner", &owner, "--subnet", "web6"],
        );
    }
    test = step(
        test,
        &[
            "allocate",
            "six",
            "--owner",
            "Node/edge",
            "--within",
            "fd00:103:0:ffff::/64",
        ],
    );
    let (svg, _) = draw(test, &["six"]);
    render(&svg, "a /48 with two subnets");
    assert_eq!(
        svg.matches(r#"<rect class="cell "#).count(),
        3,
        "one cell per subnet and one for the /64 in use outside them:\n{svg}"
    );
    let doc = roxmltree::Document::parse(&svg).expect("well-formed");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    for line in [
        "fd00:103:0:1::/64",
        "subnet web6: 3 of 2^64 - 2 candidates allocated",
        "subnet db6: 0 of 2^64 - 2 candidates allocated",
        "fd00:103:0:ffff::/64",
        "1 of 2^64 candidates allocated",
    ] {
        assert!(texts.contains(&line), "no `{line}` in {texts:?}");
    }
}
