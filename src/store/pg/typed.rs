//! Statements sent with their parameters' types, so that each is one round trip to the
//! server instead of two.
//!
//! `Client::query` first prepares a statement (a round trip that asks the server for its
//! parameter types), then runs it (a second one). Every ipamctl process opens a connection
//! of its own and runs each statement once, so nothing is gained by preparing: `query_typed`
//! sends the text, the types and the values together. The types come from the Rust values
//! ([`Param`]), so the call sites read as `query` does.

use std::net::IpAddr;

use postgres::types::{ToSql, Type};
use postgres::{Client, Error, Row};

/// A statement parameter that knows its SQL type.
pub trait Param: ToSql + Sync {
    fn sql_type(&self) -> Type;
    /// The value spelled as an SQL literal, for an `EXECUTE` sent as a simple query (a kept
    /// statement, `group.rs`); `None` for a type never spelled so (the arrays).
    fn literal(&self) -> Option<String>;
}

macro_rules! params {
    ($($rust:ty => $sql:expr, $literal:expr);* $(;)?) => {
        $(impl Param for $rust {
            fn sql_type(&self) -> Type {
                $sql
            }
            fn literal(&self) -> Option<String> {
                #[allow(clippy::redundant_closure_call)]
                ($literal)(self)
            }
        })*
    };
}

params! {
    &str => Type::TEXT, |v: &&str| Some(lit(v));
    String => Type::TEXT, |v: &String| Some(lit(v));
    Option<&str> => Type::TEXT, |v: &Option<&str>| Some(v.map_or_else(null, lit));
    Option<String> => Type::TEXT, |v: &Option<String>| Some(v.as_deref().map_or_else(null, lit));
    bool => Type::BOOL, |v: &bool| Some(v.to_string());
    i32 => Type::INT4, |v: &i32| Some(v.to_string());
    i64 => Type::INT8, |v: &i64| Some(v.to_string());
    IpAddr => Type::INET, |v: &IpAddr| Some(lit(&v.to_string()));
    Option<IpAddr> => Type::INET, |v: &Option<IpAddr>| Some(v.map_or_else(null, |a| lit(&a.to_string())));
    Vec<IpAddr> => Type::INET_ARRAY, |_: &Vec<IpAddr>| None;
    Vec<String> => Type::TEXT_ARRAY, |_: &Vec<String>| None;
    Vec<u8> => Type::BYTEA, |v: &Vec<u8>| Some(bytea(v));
    &[u8] => Type::BYTEA, |v: &&[u8]| Some(bytea(v));
}

/// `s` as an SQL string literal (standard-conforming strings: only `'` is special).
pub(super) fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn null() -> String {
    "NULL".to_owned()
}

/// Bytes as a `bytea` literal in hex (standard-conforming strings: the backslash is the
/// text's own, which `bytea`'s input reads as the hex format's mark).
///
/// Two digits a byte from a table: `write!` of each byte was 2 % of a server's CPU under
/// load, a claim's manifest spelled this way.
fn bytea(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2 + 4);
    out.push_str("'\\x");
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out.push('\'');
    out
}

/// The parameters with their types, as `query_typed` takes them.
pub(super) fn typed<'a>(params: &'a [&'a dyn Param]) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params
        .iter()
        .map(|&p| (p as &(dyn ToSql + Sync), p.sql_type()))
        .collect()
}

/// `query`, `query_one`, `query_opt` and `execute`, each in one round trip.
pub trait Typed {
    fn all(&mut self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>, Error>;
    fn one(&mut self, sql: &str, params: &[&dyn Param]) -> Result<Row, Error>;
    fn opt(&mut self, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>, Error>;
    /// Runs a statement that returns no rows; how many rows it changed.
    fn exec(&mut self, sql: &str, params: &[&dyn Param]) -> Result<u64, Error>;
}

impl Typed for Client {
    fn all(&mut self, sql: &str, params: &[&dyn Param]) -> Result<Vec<Row>, Error> {
        self.query_typed(sql, &typed(params))
    }

    fn one(&mut self, sql: &str, params: &[&dyn Param]) -> Result<Row, Error> {
        self.query_typed_one(sql, &typed(params))
    }

    fn opt(&mut self, sql: &str, params: &[&dyn Param]) -> Result<Option<Row>, Error> {
        self.query_typed_opt(sql, &typed(params))
    }

    fn exec(&mut self, sql: &str, params: &[&dyn Param]) -> Result<u64, Error> {
        let mut rows = self.query_typed_raw(sql, typed(params))?;
        while postgres::fallible_iterator::FallibleIterator::next(&mut rows)?.is_some() {}
        Ok(rows.rows_affected().unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_spelled_as_a_literal_reads_back_as_itself() {
        let addr: IpAddr = "2001:db8::1".parse().unwrap();
        let cases: [(&dyn Param, Option<&str>); 9] = [
            (&"it's", Some("'it''s'")),
            (&None::<&str>, Some("NULL")),
            (&Some("x".to_owned()), Some("'x'")),
            (&-7i64, Some("-7")),
            (&true, Some("true")),
            (&addr, Some("'2001:db8::1'")),
            (&None::<IpAddr>, Some("NULL")),
            (&vec![0u8, 0x27, 0xff], Some("'\\x0027ff'")),
            (&vec!["a".to_owned()], None),
        ];
        for (value, literal) in cases {
            assert_eq!(value.literal().as_deref(), literal);
        }
        let every: Vec<u8> = (0..=255).collect();
        let spelled: String = every.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(bytea(&every), format!("'\\x{spelled}'"));
    }
}
