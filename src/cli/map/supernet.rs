//! The map of a supernet pool (`pool show --map`): it hands out prefixes, so it is drawn by
//! them, not address by address. A bar of up to 64 cells, each an equal share of the pool,
//! says how much of the share is claimed; under it every claimed prefix, excluded prefix and
//! maximal free block in address order, each with its holder or state. Works alike for an
//! IPv4 /8 and an IPv6 /32: the rows are as many as the claims and free blocks, never one per
//! address.

use ipnet::IpNet;

use crate::model::prefix::free_blocks;

/// Cells of the bar, at most: fewer for a pool with fewer addresses.
const BAR_CELLS: u32 = 64;

/// One row of the map.
struct Row {
    prefix: IpNet,
    state: &'static str,
    holder: String,
}

/// A prefix as a span of address ordinals, first and last.
fn span(net: IpNet) -> (u128, u128) {
    match net {
        IpNet::V4(n) => (
            u128::from(u32::from(n.network())),
            u128::from(u32::from(n.broadcast())),
        ),
        IpNet::V6(n) => (u128::from(n.network()), u128::from(n.broadcast())),
    }
}

/// The text map of supernet `title` (`cidr`), with its `claims` (prefix, holder) and its
/// `excluded` prefixes.
pub fn text(title: &str, cidr: IpNet, claims: &[(IpNet, String)], excluded: &[IpNet]) -> String {
    let taken: Vec<IpNet> = claims
        .iter()
        .map(|(p, _)| *p)
        .chain(excluded.iter().copied())
        .collect();
    let mut rows: Vec<Row> = claims
        .iter()
        .map(|(prefix, holder)| Row {
            prefix: *prefix,
            state: "claimed",
            holder: holder.clone(),
        })
        .chain(excluded.iter().map(|p| Row {
            prefix: *p,
            state: "excluded",
            holder: "-".into(),
        }))
        .chain(free_blocks(cidr, &taken).into_iter().map(|p| Row {
            prefix: p,
            state: "free",
            holder: "-".into(),
        }))
        .collect();
    rows.sort_by_key(|r| (span(r.prefix).0, r.prefix.prefix_len()));

    let host_bits = u32::from(cidr.max_prefix_len() - cidr.prefix_len());
    let cell_bits = host_bits.saturating_sub(BAR_CELLS.ilog2());
    let cells = 1u32 << (host_bits - cell_bits);
    let (first, _) = span(cidr);
    let claimed: Vec<(u128, u128)> = claims.iter().map(|(p, _)| span(*p)).collect();
    let bar: String = (0..cells)
        .map(|i| {
            let lo = first + (u128::from(i) << cell_bits);
            let hi = lo + ((1u128 << cell_bits) - 1);
            let covered: u128 = claimed
                .iter()
                .map(|&(a, b)| {
                    let (a, b) = (a.max(lo), b.min(hi));
                    if a > b { 0 } else { b - a + 1 }
                })
                .sum();
            symbol(covered, hi - lo + 1)
        })
        .collect();

    let width = rows
        .iter()
        .map(|r| r.prefix.to_string().len())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "{title} {cidr}: supernet, {} claimed prefix{}, one cell per /{}\n{bar}\n\n",
        claims.len(),
        if claims.len() == 1 { "" } else { "es" },
        cidr.max_prefix_len() - u8::try_from(cell_bits).expect("at most 128 bits")
    );
    for r in &rows {
        out.push_str(&format!(
            "{:<width$}  {:<8}  {}\n",
            r.prefix.to_string(),
            r.state,
            r.holder
        ));
    }
    out.push_str(
        "\n. none claimed  : up to 25%  + up to 50%  * up to 75%  % over 75%  # all claimed\n",
    );
    out
}

/// The bar's symbol for a cell of `size` addresses of which `covered` are claimed.
fn symbol(covered: u128, size: u128) -> char {
    // Quarters, compared without floating point: covered/size against k/4.
    match covered {
        0 => '.',
        c if c == size => '#',
        c if c * 4 <= size => ':',
        c if c * 2 <= size => '+',
        c if c * 4 <= size * 3 => '*',
        _ => '%',
    }
}

#[cfg(test)]
mod tests {
    // By its path, not `super::*`: the same items, named as the layer check reads paths.
    use crate::cli::map::supernet::*;

    #[test]
    fn a_supernet_is_drawn_by_its_claims_and_free_blocks() {
        let cidr: IpNet = "10.0.0.0/16".parse().unwrap();
        let claims = [
            ("10.0.0.0/20".parse().unwrap(), "VPC/router".to_owned()),
            ("10.0.16.0/24".parse().unwrap(), "FloatingIP/a".to_owned()),
        ];
        let drawn = text("sn", cidr, &claims, &["10.0.255.0/24".parse().unwrap()]);
        let lines: Vec<&str> = drawn.lines().collect();
        assert_eq!(
            lines[0],
            "sn 10.0.0.0/16: supernet, 2 claimed prefixes, one cell per /22"
        );
        // 64 cells of a /22 each: the /20 fills four, the /24 a quarter of the fifth.
        assert_eq!(lines[1], format!("####:{}", ".".repeat(59)));
        assert_eq!(lines[3], "10.0.0.0/20    claimed   VPC/router");
        assert_eq!(lines[4], "10.0.16.0/24   claimed   FloatingIP/a");
        assert_eq!(lines[5], "10.0.17.0/24   free      -");
        assert!(drawn.contains("10.0.255.0/24  excluded  -"), "{drawn}");
        assert!(drawn.contains("10.0.128.0/18  free      -"), "{drawn}");
    }

    #[test]
    fn an_ipv6_supernet_is_drawn_without_counting_addresses() {
        let cidr: IpNet = "2001:db8::/32".parse().unwrap();
        let claims = [("2001:db8::/64".parse().unwrap(), "VPC/router".to_owned())];
        let drawn = text("v6", cidr, &claims, &[]);
        let lines: Vec<&str> = drawn.lines().collect();
        assert_eq!(lines[1], format!(":{}", ".".repeat(63)));
        // Free blocks of every length from /64 up to /33: 32 rows and the claim.
        assert_eq!(drawn.matches("  free  ").count(), 32, "{drawn}");
    }
}
