//! "Did you mean …?": the known name nearest to a mistyped one, as git suggests a command.

/// The name among `known` nearest to `wanted` by edit distance (Damerau–Levenshtein: a
/// swapped pair of letters is one edit), if it is near enough to be a typo: at most two
/// edits, and at most half the longer name's letters. Ties go to the first in name
/// order, so the answer is the same every time.
///
/// ```
/// # use ipamctl::model::suggest::nearest;
/// assert_eq!(nearest("vpc-mian", ["public-zone-a", "vpc-main"]), Some("vpc-main".into()));
/// assert_eq!(nearest("wbe", ["web", "db"]), Some("web".into()));
/// assert_eq!(nearest("db", ["web", "dns"]), None);
/// ```
pub fn nearest<'a>(wanted: &str, known: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for name in known {
        if name == wanted {
            continue;
        }
        let distance = strsim::damerau_levenshtein(wanted, name);
        let longer = wanted.chars().count().max(name.chars().count());
        if distance > 2 || distance * 2 > longer {
            continue;
        }
        if best.is_none_or(|(d, n)| (distance, name) < (d, n)) {
            best = Some((distance, name));
        }
    }
    best.map(|(_, name)| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_name_and_a_stranger_finds_nothing() {
        let pools = ["public-zone-a", "vpc-dev", "vpc-main", "vpc-main-v6"];
        assert_eq!(nearest("vpc-mian", pools), Some("vpc-main".into()));
        assert_eq!(nearest("vpc-man", pools), Some("vpc-main".into()));
        assert_eq!(
            nearest("public-zone-b", pools),
            Some("public-zone-a".into())
        );
        assert_eq!(nearest("edge", pools), None);
        // The name itself is no suggestion, and `-v6` is three edits away.
        assert_eq!(nearest("vpc-main", pools), None);
        // Nearest first, then name order.
        assert_eq!(
            nearest("vpc-de", ["vpc-dx", "vpc-dev"]),
            Some("vpc-dev".into())
        );
    }
}
