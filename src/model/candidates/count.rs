//! Counts as every output writes them: exact JSON numbers up to 2^53 and decimal strings
//! above, and the short forms of the tables (`2^64 - 4`, `1.8e19`).

/// The largest integer every JSON reader holds exactly (an IEEE double's 53 bits).
pub const MAX_EXACT_JSON: u128 = 1 << 53;

/// A count as a JSON number when a double holds it exactly, else as a decimal string: how
/// every count of every JSON (and YAML) output is written (`serialize_with`).
pub fn exact<S: serde::Serializer>(n: &u128, s: S) -> Result<S::Ok, S::Error> {
    match u64::try_from(*n) {
        Ok(n) if u128::from(n) <= MAX_EXACT_JSON => s.serialize_u64(n),
        _ => s.collect_str(n),
    }
}

/// A count for a table: exact up to a million million, else as a power of two minus what
/// is missing (`2^64 - 1`) when that is short, else SI-scaled (`1.8e19`). The exact value
/// is in the JSON.
pub fn readable_count(n: u128) -> String {
    if n < 1_000_000_000_000 {
        return n.to_string();
    }
    let up = n.checked_next_power_of_two().unwrap_or(0);
    let bits = if up == 0 { 128 } else { up.trailing_zeros() };
    let missing = if up == 0 { u128::MAX - n + 1 } else { up - n };
    match missing {
        0 => format!("2^{bits}"),
        m if m < 1_000 => format!("2^{bits} - {m}"),
        _ => format!("{:.1e}", n as f64),
    }
}

/// A count as [`readable_count`] writes it, with the exact value after it when that differs
/// (`2^64 - 4 (18446744073709551612)`): how a `show` page's `Key: value` lines write one.
pub fn readable_with_exact(n: u128) -> String {
    match readable_count(n) {
        short if short == n.to_string() => short,
        short => format!("{short} ({n})"),
    }
}
