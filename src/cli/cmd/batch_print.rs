//! A batch's results as they come (`allocate -f`, `release -f`), in every output format,
//! each printed and then dropped: what the batch keeps of its results is a count, and in
//! the table one block of rows ([`output::Blocks`]), whatever the number of requests.

use std::io::Write;

use serde::Serialize;
use serde_json::Value;

use super::batch_request::Done;
use crate::cli::output;
use crate::cli::{GlobalArgs, OutputFormat};
use crate::error::{Error, Result, exit};
use crate::yaml;

/// One request's result, in input order.
pub struct Outcome {
    /// The request's place in the input, from 0.
    pub index: usize,
    /// The line it starts on, from 1 (unknown for a YAML list not written one item a line).
    pub line: Option<usize>,
    /// The request's `owner` field as given, if any.
    pub owner: Option<String>,
    /// What it did, or why it failed.
    pub result: Result<Done>,
}

/// The table's columns, and those aligned to the right.
const HEADERS: &[&str] = &["LINE", "OWNER", "ADDRESS", "RESULT"];
const RIGHT: &[usize] = &[0];

/// Prints a batch's results in input order as they are handed to it, and counts them.
pub(crate) struct Printer {
    format: Option<OutputFormat>,
    /// The table, a block at a time (the table formats only).
    table: Option<output::Blocks>,
    /// How many results were handed in, and how many of them failed.
    done: usize,
    failed: usize,
    /// The exit code every failure so far shares; [`exit::FAILURE`] once two differ.
    code: Option<i32>,
    /// Releases that found nothing to release (`--ignore-not-found`): one note sums them up.
    unchanged: usize,
}

impl Printer {
    pub(crate) fn new(g: &GlobalArgs) -> Printer {
        let table = match g.output {
            None | Some(OutputFormat::Table | OutputFormat::Wide) => {
                Some(output::Blocks::new(HEADERS, RIGHT, g.no_headers))
            }
            Some(OutputFormat::Json | OutputFormat::Name | OutputFormat::Yaml) => None,
        };
        Printer {
            format: g.output,
            table,
            done: 0,
            failed: 0,
            code: None,
            unchanged: 0,
        }
    }

    /// How many results were handed in.
    pub(crate) fn done(&self) -> usize {
        self.done
    }

    /// How many of them failed.
    pub(crate) fn failed(&self) -> usize {
        self.failed
    }

    /// Prints `o`, the next result in input order: a JSON line (`-o json`), a YAML list's
    /// item (`-o yaml`), the result's addresses or prefix one a line (`-o name`; a failure
    /// on stderr as an `error:` line naming the request), or a row of the table (printed
    /// with its block).
    pub(crate) fn print(&mut self, out: &mut dyn Write, o: &Outcome) -> Result<()> {
        self.done += 1;
        if matches!(o.result, Ok(Done::Freed(_, _, output::Action::Unchanged))) {
            self.unchanged += 1;
        }
        if let Err(e) = &o.result {
            self.failed += 1;
            let code = e.exit_code();
            self.code = match self.code {
                Some(c) if c != code => Some(exit::FAILURE),
                Some(c) => Some(c),
                None => Some(code),
            };
        }
        if let Some(table) = &mut self.table {
            return table.push(out, row(o));
        }
        match self.format {
            Some(OutputFormat::Json) => {
                let line = serde_json::to_string(&shown(o)).expect("results serialize to JSON");
                output::line(out, &line)?;
                out.flush().map_err(|e| Error::io(output::STDOUT, e))
            }
            // An item of one list: a list of one, as the whole list writes each.
            Some(OutputFormat::Yaml) => {
                output::write(out, &yaml::encode(&[shown(o)]))?;
                out.flush().map_err(|e| Error::io(output::STDOUT, e))
            }
            Some(OutputFormat::Name) => match &o.result {
                Ok(Done::Held(values, ..) | Done::Freed(values, ..)) => {
                    let text: String = values.iter().map(|v| format!("{v}\n")).collect();
                    output::write(out, &text)
                }
                Err(e) => {
                    let at = o.line.map(|l| format!(" (line {l})")).unwrap_or_default();
                    output::diagnostic(&format!("error: request {}{at}: {e}", o.index));
                    Ok(())
                }
            },
            _ => Ok(()),
        }
    }

    /// Prints what is left once the results end: the table's last block (its header alone
    /// if there were none), or an empty YAML list if there were none.
    pub(crate) fn finish(&mut self, out: &mut dyn Write) -> Result<()> {
        let written = match (&mut self.table, self.format) {
            (Some(table), _) => table.finish(out),
            (None, Some(OutputFormat::Yaml)) if self.done == 0 => {
                output::write(out, &yaml::encode(&Vec::<Shown<'_>>::new()))
            }
            _ => Ok(()),
        };
        // Every request ran: a reader that stopped reading the table early (`| head -1`)
        // does not turn the batch's exit code into 0.
        match written {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe => {
                Ok(())
            }
            written => written,
        }
    }

    /// The batch's exit code: 0 when every request succeeded; else the code the failed
    /// requests share, or 1 ([`exit::FAILURE`]) when theirs differ.
    pub(crate) fn exit_code(&self) -> i32 {
        self.code.unwrap_or(exit::OK)
    }

    /// [`Printer::finish`], then the summary of the failures on stderr. Returns the batch's
    /// exit code.
    pub(crate) fn end(&mut self, out: &mut dyn Write) -> Result<i32> {
        self.finish(out)?;
        super::release::note_nothing_released(self.unchanged, self.done);
        let code = self.exit_code();
        if self.failed > 0 {
            output::diagnostic(&format!(
                "error: {} of {} requests failed (exit {code})",
                self.failed, self.done
            ));
        }
        Ok(code)
    }
}

/// One result as JSON (and YAML): `{index, line, owner, address|addresses|prefix, action}`
/// or `{index, line, owner, error: {exit, message, hint}}`.
#[derive(Serialize)]
struct Shown<'a> {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a str>,
    #[serde(flatten)]
    what: serde_json::Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<output::Action>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Failed>,
}

#[derive(Serialize)]
struct Failed {
    exit: i32,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
}

fn shown(o: &Outcome) -> Shown<'_> {
    let mut what = serde_json::Map::new();
    let (action, error) = match &o.result {
        Ok(Done::Held(values, key, action) | Done::Freed(values, key, action)) => {
            let value = match (*key, values.as_slice()) {
                ("addresses", _) => Value::from(values.clone()),
                (_, [one]) => Value::from(one.clone()),
                _ => Value::from(values.clone()),
            };
            what.insert((*key).to_owned(), value);
            (Some(*action), None)
        }
        Err(e) => (
            None,
            Some(Failed {
                exit: e.exit_code(),
                message: e.to_string(),
                hint: e.hint().map(str::to_owned),
            }),
        ),
    };
    Shown {
        index: o.index,
        line: o.line,
        owner: o.owner.as_deref(),
        what,
        action,
        error,
    }
}

fn row(o: &Outcome) -> Vec<String> {
    let place = o
        .line
        .map_or_else(|| format!("#{}", o.index), |l| l.to_string());
    // As given, which may be no valid owner: escaped, so that no control character of the
    // input reaches the terminal or splits the row.
    let owner = o
        .owner
        .as_deref()
        .map_or_else(|| "-".into(), |s| s.escape_debug().to_string());
    match &o.result {
        Ok(Done::Held(values, _, action) | Done::Freed(values, _, action)) => {
            let what = if values.is_empty() {
                "-".to_owned()
            } else {
                values.join(",")
            };
            vec![place, owner, what, action.to_string()]
        }
        Err(e) => vec![
            place,
            owner,
            "-".into(),
            format!("error (exit {}): {e}", e.exit_code()),
        ],
    }
}
