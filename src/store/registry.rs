//! The one registry of stores: [`open`] turns where a store is ([`Location`]: a state
//! directory, or a database's `postgres://`/`postgresql://` URL or `key=value` conninfo)
//! and one [`Config`] into the store, and nothing else in the crate decides which kind of
//! store to build. A new kind of store is one more arm here.
//!
//! It returns `Box<dyn Store + Sync>`, not an enum of the kinds: what only one kind can do
//! is asked of the store itself ([`crate::store::capability`]), so no caller needs to know
//! which kind it holds. What each store reads from the environment on opening (the file
//! store's lock timeout, the database's timeouts and libpq's variables) it still reads
//! itself, where its errors name the variable.

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::fs::FsStore;
use crate::store::pg::{PgStore, Target, conninfo};

/// Where a store is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// A state directory: the one given (`-d DIR`), else (`None`) the nearest ancestor of
    /// the current directory that holds the marker, as git finds `.git`.
    Dir(Option<PathBuf>),
    /// A database, by its connection string as given (it may hold a password: never shown
    /// unmasked).
    Database(String),
}

impl Location {
    /// The database `store` names; why not, on one line that never repeats the string (it
    /// may hold a password), if it is no PostgreSQL connection string.
    pub fn database(store: &str) -> std::result::Result<Location, String> {
        if conninfo::is_postgres(store) {
            Ok(Location::Database(store.to_owned()))
        } else {
            Err(conninfo::why_not_postgres(store))
        }
    }

    /// Where the global options put the store: a database with `store` (`--store`, a
    /// PostgreSQL connection string, never together with `state_dir`), else the state
    /// directory (`-d`, or found from the current directory up). Both front ends (the
    /// command line and `ipamctl serve`) choose it here; exit 2 for both or a string that is
    /// no connection string (which is never repeated: it may hold a password).
    pub fn choose(state_dir: Option<PathBuf>, store: Option<&str>) -> Result<Location> {
        let Some(url) = store else {
            return Ok(Location::Dir(state_dir));
        };
        if state_dir.is_some() {
            return Err(Error::Usage {
                message: "`--store` and `--state-dir` both name a store; give one".into(),
                hint: Some(
                    "a database: --store postgresql://…; a state directory: -d DIR (check IPAMCTL_STORE and IPAMCTL_STATE_DIR)"
                        .into(),
                ),
            });
        }
        Location::database(url).map_err(|why| {
            Error::Usage {
            message: format!("`--store` is not a PostgreSQL connection string: {why}"),
            hint: Some(
                "give postgresql://USER@HOST/DB or `host=… dbname=…`; a state directory is `-d DIR`"
                    .into(),
            ),
        }
        })
    }

    /// Whether it names a database.
    pub fn is_database(&self) -> bool {
        matches!(self, Location::Database(_))
    }
}

/// How to open a store, beyond where it is.
pub struct Config<'a> {
    /// How many stores [`open_workers`] opens for the workers of one batch: connections to
    /// a database, which share what each handed out. A state directory's batch runs one
    /// request at a time on one store, whatever this says.
    pub workers: usize,
    /// Called with each warning noticed while getting ready (a password file others may
    /// read), before anything connects: a connection refused for want of that password
    /// follows it.
    pub warn: &'a dyn Fn(&str),
    /// The stores answer request after request for as long as the process lives (a
    /// server): a database's connections then prepare a claim's look-ups once and keep
    /// them (`store/pg/group.rs`), where a command's are spelled out or prepared for one
    /// group at a time.
    pub long_lived: bool,
}

/// Opens the store at `at`.
pub fn open(at: &Location, config: &Config<'_>) -> Result<Box<dyn Store + Sync>> {
    Ok(match at {
        Location::Dir(dir) => Box::new(FsStore::discover(dir.as_deref())?),
        Location::Database(url) => {
            let store = PgStore::open(&target(url, config)?)?;
            if config.long_lived {
                store.keep_lookups();
            }
            Box::new(store)
        }
    })
}

/// The stores the workers of one batch run on: [`Config::workers`] connections to a
/// database, or the one state directory.
pub fn open_workers(at: &Location, config: &Config<'_>) -> Result<Vec<Box<dyn Store + Sync>>> {
    Ok(match at {
        Location::Dir(dir) => vec![Box::new(FsStore::discover(dir.as_deref())?)],
        Location::Database(url) => {
            let target = target(url, config)?;
            PgStore::open_batch(&target, config.workers)?
                .into_iter()
                .map(|mut s| {
                    if config.long_lived {
                        s.keep_lookups();
                        s.revive_from(target.clone());
                    }
                    Box::new(s) as Box<dyn Store + Sync>
                })
                .collect()
        }
    })
}

/// The database `url` names, ready to connect, once what getting ready noticed is passed
/// to [`Config::warn`]. For what opens no store (`init` makes the schema).
pub fn target(url: &str, config: &Config<'_>) -> Result<Target> {
    let target = Target::new(url)?;
    for w in target.warnings() {
        (config.warn)(w);
    }
    Ok(target)
}
