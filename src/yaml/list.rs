//! A batch's YAML list of requests (`allocate -f`, `release -f`), read as it streams: the
//! text is checked whole first ([`check_list`]), then read again item by item
//! ([`read_list`]), so that a list that does not parse runs nothing, and no more than one
//! item of it is ever held, whatever its length.
//!
//! # Limits
//!
//! The list is at most [`MAX_LIST_BYTES`] of text, and that is its only limit of size: the
//! library's counts of nodes, events, merge keys and aliases are set so that no text of that
//! size breaches them (its defaults refused a list of 40,000 requests, 1.8 MB). What a count
//! guarded against is bounded here instead: an item at most [`MAX_ITEM_BYTES`] of scalars
//! and [`MAX_ITEM_VALUES`] values (what one request can hold, as a JSON line is at most
//! 1 MiB: an item over them is read past, unkept, and is that request's failure, as such a
//! line is), the text read once per pass, and the events replayed from aliases at most one
//! a byte of the limit. Anchors keep the library's limits: what an anchor names is kept in
//! memory until the list ends.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::io::Read;
use std::rc::Rc;

use serde::de::{
    DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::{Map, Number, Value};
use serde_saphyr::options::AliasLimits;
use serde_saphyr::{Budget, DuplicateKeyPolicy, Options};

use super::{MAX_MANIFEST_BYTES, one_line};

/// The largest list of requests read (`allocate -f`, `release -f`).
pub const MAX_LIST_BYTES: u64 = 64 << 20;

/// The most scalar text one item of a list may hold: what a JSON line may.
pub const MAX_ITEM_BYTES: u64 = MAX_MANIFEST_BYTES;

/// The most values (scalars, lists and maps) one item of a list may hold.
pub const MAX_ITEM_VALUES: usize = 10_000;

/// Why a list was refused whole.
#[derive(Debug, PartialEq, Eq)]
pub enum ListError {
    /// More than [`MAX_LIST_BYTES`].
    TooLarge,
    /// Not UTF-8.
    NotUtf8,
    /// Not a YAML list: `line L column C: message`.
    Invalid(String),
    /// [`read_list`]'s `each` asked for no more.
    Stopped,
}

/// What [`check_list`] found: what [`read_list`] needs to give each item its line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// How many items the list holds.
    pub items: usize,
    /// Whether each item starts a line of its own at the margin (`- …`): the list is a block
    /// sequence written one item a line, and the lines that start with `- ` are its items'.
    lines: bool,
}

/// Reads `input` whole as a YAML list, as [`read_list`] will, holding one item at a time:
/// whether it parses, how many items it holds, and whether their lines can be told.
pub fn check_list(input: impl Read) -> Result<Checked, ListError> {
    let mut meter = Meter::new(input, None);
    let mut items = 0;
    parse(&mut meter, &mut |_| {
        items += 1;
        true
    })?;
    Ok(Checked {
        items,
        lines: meter.starts == items,
    })
}

/// An item of a list: its value, or why it was not kept (larger than a request can be).
pub type Item = Result<Value, String>;

/// Reads `input`, the text [`check_list`] found to be `checked`, giving `each` every item
/// as it is parsed, with the line it starts on (from 1) when the list is written one item a
/// line; stops when `each` returns `false` ([`ListError::Stopped`]). An error is the text
/// having changed since it was checked.
pub fn read_list(
    input: impl Read,
    checked: Checked,
    each: &mut dyn FnMut(Option<usize>, Item) -> bool,
) -> Result<(), ListError> {
    let queue = Rc::new(RefCell::new(VecDeque::new()));
    let mut meter = Meter::new(input, checked.lines.then(|| queue.clone()));
    parse(&mut meter, &mut |value| {
        // The item's first line has been read: the parser cannot end an item before it.
        let line = if checked.lines {
            queue.borrow_mut().pop_front()
        } else {
            None
        };
        each(line, value)
    })
}

/// The library's options for a list: every count at least what [`MAX_LIST_BYTES`] of text
/// can hold (a node or an event takes at least a quarter of a byte: `[?,?,…]` makes three
/// nodes and six events of every two bytes), the replay of aliases one event a byte.
fn options() -> Options {
    let size = MAX_LIST_BYTES as usize;
    let mut budget = Budget::default();
    budget.max_reader_input_bytes = Some(size);
    budget.max_nodes = 4 * size;
    budget.max_events = 4 * size;
    budget.max_total_scalar_bytes = size;
    budget.max_merge_keys = size;
    budget.max_aliases = size;
    // Many aliases of one anchor (`<<: *defaults` in every item) are what a list is for; the
    // work they make is bounded by the replay limit.
    budget.enforce_alias_anchor_ratio = false;
    let mut alias_limits = AliasLimits::default();
    alias_limits.max_total_replayed_events = size;
    serde_saphyr::options! {
        with_snippet: false,
        duplicate_keys: DuplicateKeyPolicy::Error,
        budget: Some(budget),
        alias_limits: alias_limits,
    }
}

/// Parses the list `meter` reads, giving each item to `each` until it returns `false`.
fn parse(
    meter: &mut Meter<impl Read>,
    each: &mut dyn FnMut(Item) -> bool,
) -> Result<(), ListError> {
    let stopped = Cell::new(false);
    let parsed =
        serde_saphyr::with_deserializer_from_reader_with_options(&mut *meter, options(), |de| {
            de.deserialize_seq(Items {
                each,
                stopped: &stopped,
            })
        });
    match parsed {
        Ok(()) => Ok(()),
        Err(_) if stopped.get() => Err(ListError::Stopped),
        Err(_) if meter.over => Err(ListError::TooLarge),
        Err(_) if meter.bad_utf8 => Err(ListError::NotUtf8),
        Err(e) => Err(ListError::Invalid(one_line(e))),
    }
}

/// The list: each item as a bounded [`Value`], handed on.
struct Items<'a, 'b> {
    each: &'a mut dyn FnMut(Item) -> bool,
    stopped: &'b Cell<bool>,
}

impl<'de> Visitor<'de> for Items<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        loop {
            let left = Left {
                bytes: Cell::new(MAX_ITEM_BYTES),
                values: Cell::new(MAX_ITEM_VALUES),
                over: Cell::new(false),
            };
            let Some(value) = seq.next_element_seed(Bounded(&left))? else {
                return Ok(());
            };
            let item = if left.over.get() {
                Err(format!(
                    "item {index} of the list is larger than a request can be \
                     ({MAX_ITEM_BYTES} bytes of text, {MAX_ITEM_VALUES} values)"
                ))
            } else {
                Ok(value)
            };
            if !(self.each)(item) {
                self.stopped.set(true);
                return Err(A::Error::custom("stopped"));
            }
            index += 1;
        }
    }
}

/// What one item may still hold; once it is over, what is left of it is read past.
struct Left {
    bytes: Cell<u64>,
    values: Cell<usize>,
    over: Cell<bool>,
}

impl Left {
    /// Takes one value of `bytes` of text from what is left: `false` once the item is over.
    fn take(&self, bytes: usize) -> bool {
        let (values, text) = (self.values.get(), self.bytes.get());
        match (values.checked_sub(1), text.checked_sub(bytes as u64)) {
            (Some(values), Some(text)) if !self.over.get() => {
                self.values.set(values);
                self.bytes.set(text);
                true
            }
            _ => {
                self.over.set(true);
                false
            }
        }
    }
}

/// A JSON value as `serde_json` makes it from YAML, while what is [`Left`] for its item
/// lasts; `null` after, and the rest of the item read past unkept.
struct Bounded<'a>(&'a Left);

impl Bounded<'_> {
    /// `value`, if one more value of `bytes` of text fits in the item.
    fn keep(&self, bytes: usize, value: impl FnOnce() -> Value) -> Value {
        if self.0.take(bytes) {
            value()
        } else {
            Value::Null
        }
    }
}

impl<'de> DeserializeSeed<'de> for Bounded<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Bounded<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(self.keep(0, || Value::Bool(v)))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(self.keep(0, || Value::Number(v.into())))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(self.keep(0, || Value::Number(v.into())))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(self.keep(0, || Number::from_f64(v).map_or(Value::Null, Value::Number)))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(self.keep(v.len(), || Value::String(v.to_owned())))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        let bytes = v.len();
        Ok(self.keep(bytes, || Value::String(v)))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(self.keep(0, || Value::Null))
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        Ok(self.keep(0, || Value::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        if !self.0.take(0) {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Bounded(self.0))? {
            if !self.0.over.get() {
                items.push(item);
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        if !self.0.take(0) {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Value::Null);
        }
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let kept = self.0.take(key.len());
            let value = map.next_value_seed(Bounded(self.0))?;
            if kept && !self.0.over.get() {
                fields.insert(key, value);
            }
        }
        Ok(Value::Object(fields))
    }
}

/// The list's text as the parser reads it: counted against [`MAX_LIST_BYTES`], checked to
/// be UTF-8, and its item lines (`-` alone or `- …` at the margin) noted as they pass.
struct Meter<R> {
    inner: R,
    read: u64,
    over: bool,
    bad_utf8: bool,
    /// The incomplete UTF-8 sequence that ended the last chunk.
    carry: Vec<u8>,
    /// The line the next byte is on, from 1, and where in it.
    line: usize,
    at: At,
    /// How many item lines passed; and where [`read_list`] wants their numbers.
    starts: usize,
    queue: Option<Rc<RefCell<VecDeque<usize>>>>,
}

/// Where in its line the next byte is, as far as an item line is concerned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// The first byte.
    Start,
    /// After a `-` at the margin.
    Dash,
    /// After `-\r` at the margin.
    DashReturn,
    /// Anywhere else.
    Rest,
}

impl<R: Read> Meter<R> {
    fn new(inner: R, queue: Option<Rc<RefCell<VecDeque<usize>>>>) -> Meter<R> {
        Meter {
            inner,
            read: 0,
            over: false,
            bad_utf8: false,
            carry: Vec::new(),
            line: 1,
            at: At::Start,
            starts: 0,
            queue,
        }
    }

    fn start(&mut self) {
        self.starts += 1;
        if let Some(queue) = &self.queue {
            queue.borrow_mut().push_back(self.line);
        }
    }

    /// Notes the item lines of `bytes`, as `str::lines` would split them.
    fn lines(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.at = match (self.at, b) {
                (At::Dash | At::DashReturn, b'\n') => {
                    self.start();
                    self.line += 1;
                    At::Start
                }
                (_, b'\n') => {
                    self.line += 1;
                    At::Start
                }
                (At::Start, b'-') => At::Dash,
                (At::Dash, b' ') => {
                    self.start();
                    At::Rest
                }
                (At::Dash, b'\r') => At::DashReturn,
                _ => At::Rest,
            };
        }
    }

    /// Checks that `bytes`, after what came before, are UTF-8 so far.
    fn utf8(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !self.carry.is_empty() {
            let Some((&b, tail)) = rest.split_first() else {
                return;
            };
            self.carry.push(b);
            rest = tail;
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                Err(e) if e.error_len().is_some() => {
                    self.bad_utf8 = true;
                    return;
                }
                Err(_) => {}
            }
        }
        if let Err(e) = std::str::from_utf8(rest) {
            match e.error_len() {
                Some(_) => self.bad_utf8 = true,
                None => self.carry = rest[e.valid_up_to()..].to_vec(),
            }
        }
    }
}

impl<R: Read> Read for Meter<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let bytes = &buf[..n];
        if n == 0 {
            if self.at == At::Dash {
                self.start();
                self.at = At::Rest;
            }
            if !self.carry.is_empty() {
                self.bad_utf8 = true;
            }
        }
        self.read += n as u64;
        self.over = self.read > MAX_LIST_BYTES;
        self.utf8(bytes);
        self.lines(bytes);
        if self.over || self.bad_utf8 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a list of requests",
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out `chunk` bytes a read: items, lines and UTF-8 sequences cut
    /// anywhere.
    struct Trickle<'a> {
        text: &'a [u8],
        chunk: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.text.len());
            buf[..n].copy_from_slice(&self.text[..n]);
            self.text = &self.text[n..];
            Ok(n)
        }
    }

    /// Every item of `text` with its line, read `chunk` bytes at a time.
    fn items(text: &str, chunk: usize) -> Result<Vec<(Option<usize>, Item)>, ListError> {
        let reader = || Trickle {
            text: text.as_bytes(),
            chunk,
        };
        let checked = check_list(reader())?;
        let mut got = Vec::new();
        read_list(reader(), checked, &mut |line, value| {
            got.push((line, value));
            true
        })?;
        assert_eq!(got.len(), checked.items);
        Ok(got)
    }

    #[test]
    fn items_come_with_their_lines_when_written_one_a_line() {
        let text = "# requests\n- pool: p\n  owner: é/x/0\n-\n  pool: q\n- {pool: r}\r\n- \"s\"\n";
        for chunk in [1, 2, 3, 7, 4096] {
            let got = items(text, chunk).unwrap();
            let lines: Vec<Option<usize>> = got.iter().map(|(l, _)| *l).collect();
            assert_eq!(lines, [Some(2), Some(4), Some(6), Some(7)], "chunk {chunk}");
            assert_eq!(got[0].1.as_ref().unwrap()["owner"], "é/x/0");
            assert_eq!(got[1].1.as_ref().unwrap()["pool"], "q");
            assert_eq!(got[3].1, Ok(Value::from("s")));
        }
        // Not one item a line: no lines, rather than wrong ones.
        let flow = items("[{pool: p},\n {pool: q}]\n", 1).unwrap();
        assert_eq!(
            flow.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            [None, None]
        );
        let nested = items("- pool: p\n  subnets:\n- pool: q\n  x: |\n   - a\n", 5).unwrap();
        assert_eq!(
            nested.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            [Some(1), Some(3)]
        );
    }

    /// What the library's default budget refused: more than 10,000 merge keys, ten aliases an
    /// anchor (and more than 250,000 nodes: `tests/batch_stream.rs`, 40,000 requests).
    #[test]
    fn a_list_is_limited_by_its_size_not_by_the_librarys_default_counts() {
        let mut text = String::from("- &d {pool: p, subnets: [a, b]}\n");
        for i in 0..10_500 {
            text.push_str(&format!(
                "- <<: *d\n  owner: VirtualMachine/vm-{i}/0\n  uid: u{i}\n"
            ));
        }
        let checked = check_list(text.as_bytes()).unwrap();
        assert_eq!(checked.items, 10_501);
        let mut last = None;
        read_list(text.as_bytes(), checked, &mut |line, v| {
            last = Some((line, v));
            true
        })
        .unwrap();
        let (line, value) = last.unwrap();
        let value = value.unwrap();
        assert_eq!(line, Some(2 + 3 * 10_499));
        assert_eq!(value["subnets"][1], "b");
        assert_eq!(value["owner"], "VirtualMachine/vm-10499/0");
    }

    #[test]
    fn a_list_that_is_not_one_or_not_utf8_is_refused_whole() {
        let invalid = |text: &[u8]| match check_list(text) {
            Err(ListError::Invalid(why)) => why,
            other => panic!("{other:?}"),
        };
        assert!(invalid(b"pool: p\n").contains("line 1 column 1"));
        let unclosed = invalid(b"- a\n- [b\n");
        assert_eq!(unclosed, "line 2 column 3: unclosed bracket '['");
        assert!(invalid(b"- {a: 1, a: 2}\n").contains("duplicate"));
        // A sequence cut between two reads is UTF-8; a stray byte or a cut end is not.
        for chunk in [1, 2] {
            let text = "- é\n".as_bytes();
            let reader = Trickle { text, chunk };
            assert_eq!(check_list(reader).map(|c| c.items), Ok(1));
        }
        assert_eq!(check_list(&b"- \xff\n"[..]), Err(ListError::NotUtf8));
        assert_eq!(check_list(&b"- a\xc3"[..]), Err(ListError::NotUtf8));
    }

    #[test]
    fn reading_stops_when_asked_to() {
        let text = "- a\n- b\n- c\n";
        let checked = check_list(text.as_bytes()).unwrap();
        let mut seen = 0;
        let read = read_list(text.as_bytes(), checked, &mut |_, _| {
            seen += 1;
            seen < 2
        });
        assert_eq!(read, Err(ListError::Stopped));
        assert_eq!(seen, 2);
    }

    /// An item over what a request can hold is read past, unkept, and is that item's
    /// failure alone: the items around it come whole, with their lines.
    #[test]
    fn an_item_larger_than_a_request_fails_alone() {
        let text = "x".repeat(MAX_ITEM_BYTES as usize);
        let many = "1,".repeat(MAX_ITEM_VALUES);
        // The list and its values: exactly what an item may hold.
        let fits = "1,".repeat(MAX_ITEM_VALUES - 1);
        let list = format!(
            "- a\n- owner: {text}\n  more: [1, {{b: 2}}]\n- {{v: [{many}], w: 1}}\n- [{fits}]\n- [[[{many}]]]\n- z\n"
        );
        let got = items(&list, 4096).unwrap();
        let lines: Vec<Option<usize>> = got.iter().map(|(l, _)| *l).collect();
        assert_eq!(
            lines,
            [Some(1), Some(2), Some(4), Some(5), Some(6), Some(7)]
        );
        assert_eq!(got[0].1, Ok(Value::from("a")));
        for (i, item) in [(1, &got[1].1), (2, &got[2].1), (4, &got[4].1)] {
            let why = item.as_ref().unwrap_err();
            assert!(
                why.starts_with(&format!(
                    "item {i} of the list is larger than a request can be"
                )),
                "{why}"
            );
        }
        assert_eq!(
            got[3].1.as_ref().unwrap().as_array().unwrap().len(),
            MAX_ITEM_VALUES - 1
        );
        assert_eq!(got[5].1, Ok(Value::from("z")));
    }
}
