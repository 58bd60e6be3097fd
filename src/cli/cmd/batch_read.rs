//! Reading a batch's requests (`allocate -f`, `release -f`): JSON lines, one request a
//! line, read and run as they come, or a YAML list, checked whole and then read again item
//! by item as the requests run; every line and item bounded, so that no input (a line
//! without end, comments without end, `/dev/zero`, a list of a million items) is read for
//! ever or held whole.

use std::io::{BufRead, Read as _, Seek, SeekFrom, Write as _};

use serde_json::Value;

use crate::error::{Error, Result};
use crate::yaml::{self, ListError};

/// One request as read: the line it starts on, and its fields (or why it is not one).
pub(crate) type Read = (Option<usize>, Result<Value>);

/// The `owner` a line gives, as given (the printer's column), if it is a JSON object with one.
pub(crate) fn given_owner(request: &Result<Value>) -> Option<String> {
    request
        .as_ref()
        .ok()
        .and_then(|r| r.get("owner"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A batch's requests, to be read in order by [`Requests::feed`].
pub(crate) enum Requests {
    /// JSON lines, read as they are asked for.
    Lines(Box<dyn Iterator<Item = Read> + Send>),
    /// A YAML list that parsed whole ([`yaml::check_list`]): the text is read again to run
    /// it, from the start of `text` (the file itself, or stdin copied to a temporary file).
    List {
        file: String,
        text: std::fs::File,
        checked: yaml::Checked,
    },
}

impl Requests {
    /// Gives `send` each request in turn, until there are no more or it returns `false`.
    pub(crate) fn feed(self, send: &mut dyn FnMut(Read) -> bool) {
        match self {
            Requests::Lines(lines) => {
                for request in lines {
                    if !send(request) {
                        return;
                    }
                }
            }
            Requests::List {
                file,
                text,
                checked,
            } => {
                let read = std::io::BufReader::new(text);
                // An item too large to keep is that request's failure, as a line too long is.
                let mut each = |line, item: yaml::Item| {
                    send((line, item.map_err(|why| Error::invalid(&file, why))))
                };
                match yaml::read_list(read, checked, &mut each) {
                    Ok(()) | Err(ListError::Stopped) => {}
                    // Checked whole, the text no longer is what was checked: someone wrote
                    // to the file meanwhile. The requests read so far ran; this is the last.
                    Err(e) => {
                        let why = format!("changed while it was read ({})", list_error(&e));
                        send((None, Err(Error::invalid(&file, why))));
                    }
                }
            }
        }
    }
}

/// The requests of `file` (`-`: stdin), in order: JSON lines when its first line that is
/// not blank or a `#` comment starts with `{`, read and run one line at a time (a pipe
/// may feed a batch as it goes); else a YAML list of at most [`yaml::MAX_LIST_BYTES`],
/// checked whole before this returns (stdin copied to a temporary file for it), then read
/// again as it runs. A JSON line that does not parse is that request's error; a YAML text
/// that does not parse is the whole batch's (exit 2, nothing run), as no item of it can be
/// told from the next.
pub(crate) fn requests(file: &str) -> Result<Requests> {
    let (mut input, whole): (Box<dyn BufRead + Send>, Option<std::fs::File>) = if file == "-" {
        (Box::new(std::io::BufReader::new(std::io::stdin())), None)
    } else {
        let opened = super::apply::open_regular(file, "-f -")?;
        let read = opened.try_clone().map_err(|e| Error::io(file, e))?;
        (Box::new(std::io::BufReader::new(read)), Some(opened))
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
        return Ok(Requests::Lines(Box::new(std::iter::empty())));
    };
    if first.trim_start().starts_with('{') {
        return Ok(Requests::Lines(json_lines(input, file, first, number)));
    }
    // The file itself is read again from its start; stdin, which cannot be, is kept in a
    // file of its own (at most the limit, and one byte more to see that it is over).
    let mut text = match whole {
        Some(whole) => whole,
        None => {
            let mut copy = tempfile::tempfile().map_err(|e| Error::io("<temporary file>", e))?;
            let rest = (yaml::MAX_LIST_BYTES + 1).saturating_sub(head.len() as u64);
            copy.write_all(head.as_bytes())
                .and_then(|()| std::io::copy(&mut input.take(rest), &mut copy).map(drop))
                .map_err(|e| Error::io(file, e))?;
            copy
        }
    };
    let rewind = |text: &mut std::fs::File| {
        text.seek(SeekFrom::Start(0))
            .map(drop)
            .map_err(|e| Error::io(file, e))
    };
    // Over the limit is said at once; a file that grows past it while read is caught by
    // the reading itself.
    let size = text.metadata().map_err(|e| Error::io(file, e))?.len();
    if size > yaml::MAX_LIST_BYTES {
        return Err(Error::invalid(file, list_error(&ListError::TooLarge)));
    }
    rewind(&mut text)?;
    let checked = yaml::check_list(std::io::BufReader::new(&text)).map_err(|e| match e {
        ListError::Invalid(_) => Error::invalid(
            file,
            format!(
                "{} (a batch is JSON lines or a YAML list of requests)",
                list_error(&e)
            ),
        ),
        e => Error::invalid(file, list_error(&e)),
    })?;
    rewind(&mut text)?;
    Ok(Requests::List {
        file: file.to_owned(),
        text,
        checked,
    })
}

/// Why a YAML list was refused, as the words after its file's name.
fn list_error(e: &ListError) -> String {
    match e {
        ListError::TooLarge => format!("is larger than {} bytes", yaml::MAX_LIST_BYTES),
        ListError::NotUtf8 => "is not UTF-8 text".into(),
        ListError::Invalid(why) => why.clone(),
        ListError::Stopped => "was not read to its end".into(),
    }
}

/// The JSON lines of `input`, `first` (line `number`) the first of them, each parsed as it
/// is asked for.
fn json_lines(
    mut input: Box<dyn BufRead + Send>,
    file: &str,
    first: String,
    mut number: usize,
) -> Box<dyn Iterator<Item = Read> + Send> {
    let file = file.to_owned();
    let mut next = Some(first);
    let mut ended = false;
    Box::new(std::iter::from_fn(move || {
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
    }))
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
