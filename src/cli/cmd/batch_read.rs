//! Reading a batch's requests (`allocate -f`, `release -f`): JSON lines, one request a
//! line, read and run as they come, or a YAML list read whole; every line bounded, so that
//! no input (a line without end, comments without end, `/dev/zero`) is read for ever or
//! held whole.

use std::io::{BufRead, Read as _};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::yaml;

/// One request as read: the line it starts on, and its fields (or why it is not one).
pub(super) type Read = (Option<usize>, Result<Value>);

/// The requests of `file` (`-`: stdin), in order: JSON lines when its first line that is
/// not blank or a `#` comment starts with `{`, read and run one line at a time (a pipe
/// may feed a batch as it goes); else a YAML list, read whole (at most
/// [`yaml::MAX_LIST_BYTES`]). A JSON line that does not parse is that request's error; a
/// YAML text that does not parse is the whole batch's (exit 2, nothing run), as no item of
/// it can be told from the next.
pub(super) fn requests(file: &str) -> Result<Box<dyn Iterator<Item = Read> + Send>> {
    let mut input: Box<dyn BufRead + Send> = if file == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(super::apply::open_regular(file)?))
    };
    let mut head = String::new();
    let mut number = 0;
    let first = loop {
        let mut line = String::new();
        let n = read_line(&mut input, file, &mut line, &mut false)?;
        if n == 0 {
            break None;
        }
        number += 1;
        head.push_str(&line);
        let trimmed = line.trim();
        if !trimmed.is_empty() && !trimmed.starts_with('#') {
            break Some(line);
        }
        // What is kept for the YAML form is bounded as the YAML form is (`yes '#'`).
        let limit = yaml::MAX_LIST_BYTES;
        if head.len() as u64 > limit {
            return Err(Error::invalid(
                file,
                format!("has no request in its first {limit} bytes"),
            ));
        }
    };
    let Some(first) = first else {
        return Ok(Box::new(std::iter::empty()));
    };
    if first.trim_start().starts_with('{') {
        let file = file.to_owned();
        let mut next = Some(first);
        let mut ended = false;
        let lines = std::iter::from_fn(move || {
            loop {
                let line = match next.take() {
                    Some(line) => line,
                    None if ended => return None,
                    None => {
                        let mut line = String::new();
                        match read_line(&mut input, &file, &mut line, &mut ended) {
                            Ok(0) => return None,
                            Ok(_) => number += 1,
                            Err(e) => {
                                number += 1;
                                return Some((Some(number), Err(e)));
                            }
                        }
                        line
                    }
                };
                let trimmed = line.trim();
                if trimmed.is_empty() || trimmed.starts_with('#') {
                    continue;
                }
                let parsed = serde_json::from_str::<Fields>(trimmed)
                    .map(|f| Value::Object(f.0))
                    .map_err(|e| {
                        Error::invalid(&file, format!("line {number}: not a JSON object: {e}"))
                    });
                return Some((Some(number), parsed));
            }
        });
        return Ok(Box::new(lines));
    }
    let limit = yaml::MAX_LIST_BYTES;
    let mut rest = Vec::new();
    input
        .take(limit + 1)
        .read_to_end(&mut rest)
        .map_err(|e| Error::io(file, e))?;
    if (head.len() + rest.len()) as u64 > limit {
        return Err(Error::invalid(
            file,
            format!("is larger than {limit} bytes"),
        ));
    }
    head.push_str(
        std::str::from_utf8(&rest).map_err(|_| Error::invalid(file, "is not UTF-8 text"))?,
    );
    let items = yaml::decode_list(&head).map_err(|e| {
        Error::invalid(
            file,
            format!("{e} (a batch is JSON lines or a YAML list of requests)"),
        )
    })?;
    Ok(Box::new(items.into_iter().map(|(line, v)| (line, Ok(v)))))
}

/// A JSON request's fields. A field given twice is refused, as the YAML form refuses it: a
/// JSON parser keeps the last silently, and `{"owner": A, …, "owner": B}` is no request to
/// guess at.
struct Fields(serde_json::Map<String, Value>);

impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Object;
        impl<'de> serde::de::Visitor<'de> for Object {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of fields")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Fields, A::Error> {
                let mut fields = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value: Value = map.next_value()?;
                    if fields.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!(
                            "field `{key}` is given twice"
                        )));
                    }
                    fields.insert(key, value);
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(Object)
    }
}

/// Reads one line of at most [`yaml::MAX_MANIFEST_BYTES`] into `line`; returns its length,
/// 0 at the end. A line too long (exit 2) or not UTF-8 is still consumed whole, up to its
/// newline: a failed line is one failed request, and the next line is the next request.
/// Sets `ended` where nothing after the failure can be read: an I/O error, or a line whose
/// end is not within [`yaml::MAX_LIST_BYTES`] (`/dev/zero`), which is not read to its end.
fn read_line(
    input: &mut dyn BufRead,
    file: &str,
    line: &mut String,
    ended: &mut bool,
) -> Result<usize> {
    let limit = yaml::MAX_MANIFEST_BYTES;
    let mut bytes = Vec::new();
    let n = input
        .take(limit + 1)
        .read_until(b'\n', &mut bytes)
        .inspect_err(|_| *ended = true)
        .map_err(|e| Error::io(file, e))?;
    if n as u64 > limit {
        let skip = yaml::MAX_LIST_BYTES;
        let found = skip_line(input, skip)
            .inspect_err(|_| *ended = true)
            .map_err(|e| Error::io(file, e))?;
        *ended = !found;
        let rest = if found {
            String::new()
        } else {
            format!(" (nor ends within {skip} more; the rest of the input is not read)")
        };
        return Err(Error::invalid(
            file,
            format!("has a line longer than {limit} bytes{rest}"),
        ));
    }
    line.push_str(
        std::str::from_utf8(&bytes).map_err(|_| Error::invalid(file, "is not UTF-8 text"))?,
    );
    Ok(n)
}

/// Consumes what is left of the current line, its newline included, holding none of it;
/// at most `limit` bytes. Returns whether the line ended (at a newline or the input's end)
/// within them.
fn skip_line(input: &mut dyn BufRead, limit: u64) -> std::io::Result<bool> {
    let mut skipped = 0u64;
    while skipped <= limit {
        let buffer = match input.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buffer.is_empty() {
            return Ok(true);
        }
        if let Some(at) = buffer.iter().position(|&b| b == b'\n') {
            input.consume(at + 1);
            return Ok(true);
        }
        let all = buffer.len();
        input.consume(all);
        skipped += all as u64;
    }
    Ok(false)
}
