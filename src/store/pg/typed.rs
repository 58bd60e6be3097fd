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
}

macro_rules! params {
    ($($rust:ty => $sql:expr),* $(,)?) => {
        $(impl Param for $rust {
            fn sql_type(&self) -> Type {
                $sql
            }
        })*
    };
}

params! {
    &str => Type::TEXT,
    String => Type::TEXT,
    Option<&str> => Type::TEXT,
    Option<String> => Type::TEXT,
    bool => Type::BOOL,
    i32 => Type::INT4,
    i64 => Type::INT8,
    IpAddr => Type::INET,
    Option<IpAddr> => Type::INET,
    Vec<IpAddr> => Type::INET_ARRAY,
    Vec<String> => Type::TEXT_ARRAY,
    Vec<u8> => Type::BYTEA,
    &[u8] => Type::BYTEA,
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
