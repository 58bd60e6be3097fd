//! A request's fields as a batch line gives them (JSON or YAML, read with serde): what each
//! field may hold, said in the words the batch has always used. A request is an object;
//! a field is one of the request's known names; a value is a string or a number, or a list
//! of them where the flag may be given several times; a switch is `true` or `false`; `null`
//! is a field left out, but for the fields a batch's command line gives its requests
//! ([`Defaults`]), where it says "not that one".

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// What the batch's command line gives the requests that do not say otherwise.
#[derive(Clone, Copy, Debug, Default)]
pub struct Defaults<'a> {
    /// `-n`: the scope of a request without `namespace` (not one with `"namespace": null`).
    pub namespace: Option<&'a str>,
    /// `--dry-run`: every request is a dry run, whatever it says (a preview that a
    /// request's `"dryRun": false` turned into a real release would lose addresses).
    pub dry_run: bool,
    /// `release -f --ignore-not-found`: for the requests without `ignoreNotFound`.
    pub ignore_not_found: bool,
}

/// One field's value as a request gives it.
#[derive(Debug)]
pub(super) enum Given {
    /// Not in the request.
    Absent,
    Null,
    Switch(bool),
    /// A string or a number.
    Text(String),
    /// A list of strings or numbers.
    List(Vec<String>),
    EmptyList,
    /// Anything else (an object, a list of lists, a boolean in a list).
    Other,
}

/// A request's fields, each taken once by the type it builds.
pub(super) struct Fields(Vec<(String, Given)>);

impl Fields {
    /// The value of `name` ([`Given::Absent`] when left out).
    fn take(&mut self, name: &str) -> Given {
        match self.0.iter().position(|(k, _)| k == name) {
            Some(i) => self.0.swap_remove(i).1,
            None => Given::Absent,
        }
    }

    /// A value that may be given several times (`--subnet`), empty when left out.
    pub(super) fn texts(&mut self, name: &str) -> Result<Vec<String>, String> {
        match self.take(name) {
            Given::Absent | Given::Null => Ok(Vec::new()),
            Given::Text(text) => Ok(vec![text]),
            Given::List(texts) => Ok(texts),
            // No value at all: never the same as leaving the field out (`"address": []`
            // is not "any address").
            Given::EmptyList => Err(format!(
                "`{name}` is an empty list; leave the field out, or give it a value"
            )),
            Given::Switch(_) | Given::Other => {
                Err(format!("`{name}` is a string or a list of strings"))
            }
        }
    }

    /// A value given once at most, as the flag `flag` (`--owner <KIND/NAME>`) is.
    pub(super) fn text(&mut self, name: &str, flag: &str) -> Result<Option<String>, String> {
        let mut texts = self.texts(name)?;
        match texts.len() {
            0 | 1 => Ok(texts.pop()),
            _ => Err(format!(
                "the argument '{flag}' cannot be used multiple times"
            )),
        }
    }

    /// A value given once at most, inherited from `default` when left out (not when null).
    pub(super) fn inherited_text(
        &mut self,
        name: &str,
        flag: &str,
        default: Option<&str>,
    ) -> Result<Option<String>, String> {
        match self.0.iter().find(|(k, _)| k == name) {
            None => Ok(default.map(str::to_owned)),
            Some(_) => self.text(name, flag),
        }
    }

    /// A switch: `true` or `false`; `None` when left out or null.
    pub(super) fn switch(&mut self, name: &str) -> Result<Option<bool>, String> {
        match self.take(name) {
            Given::Absent | Given::Null => Ok(None),
            Given::Switch(on) => Ok(Some(on)),
            _ => Err(format!("`{name}` is true or false")),
        }
    }

    /// A switch inherited from `default` when left out (a null is `false`).
    pub(super) fn inherited_switch(&mut self, name: &str, default: bool) -> Result<bool, String> {
        let absent = !self.0.iter().any(|(k, _)| k == name);
        Ok(self.switch(name)?.unwrap_or(absent && default))
    }

    /// `--prefix-length`: a number from 0 to 255 (or its text).
    pub(super) fn length(&mut self, name: &str, flag: &str) -> Result<Option<u8>, String> {
        let Some(text) = self.text(name, flag)? else {
            return Ok(None);
        };
        let n: i64 = text
            .parse()
            .map_err(|e| format!("invalid value '{text}' for '{flag}': {e}"))?;
        u8::try_from(n)
            .map(Some)
            .map_err(|_| format!("invalid value '{text}' for '{flag}': {n} is not in 0..=255"))
    }
}

/// Reads a request's fields with `deserializer`: an object whose keys are all in `known`,
/// and which gives at most one of each pair of `one_field` (`pool` and `pools`).
pub(super) fn fields<'de, D: Deserializer<'de>>(
    deserializer: D,
    known: &'static [&'static str],
    one_field: &'static [(&'static str, &'static str)],
) -> Result<Fields, String> {
    let fields = deserializer
        .deserialize_any(RequestVisitor)
        .map_err(|e: D::Error| e.to_string())?;
    if let Some((unknown, _)) = fields.iter().find(|(k, _)| !known.contains(&k.as_str())) {
        return Err(format!(
            "unknown field `{unknown}`; a request has {}",
            known.join(", ")
        ));
    }
    // Two fields for one flag, a single value and a list: a request gives one of them, or
    // what it asks for is a guess (`pool` and `pools` together would claim in both).
    let given = |f: &str| {
        fields
            .iter()
            .any(|(k, v)| k == f && !matches!(v, Given::Null))
    };
    for (one, many) in one_field {
        if given(one) && given(many) {
            return Err(format!(
                "`{one}` and `{many}` are one field: give `{one}` (a name) or `{many}` (a list)"
            ));
        }
    }
    Ok(Fields(fields))
}

/// The words for a request that is not an object.
const NOT_AN_OBJECT: &str = "a request is an object of fields";

struct RequestVisitor;

impl<'de> Visitor<'de> for RequestVisitor {
    type Value = Vec<(String, Given)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(NOT_AN_OBJECT)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields: Vec<(String, Given)> = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Given>()? {
            fields.retain(|(k, _)| *k != key);
            fields.push((key, value));
        }
        Ok(fields)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Err(E::custom(NOT_AN_OBJECT))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Err(de::Error::custom(NOT_AN_OBJECT))
    }
}

impl<'de> serde::Deserialize<'de> for Given {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Given, D::Error> {
        deserializer.deserialize_any(GivenVisitor)
    }
}

/// A number as its text, as JSON spells it (`1.0` stays `1.0`).
fn float_text(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        v.to_string()
    }
}

struct GivenVisitor;

impl<'de> Visitor<'de> for GivenVisitor {
    type Value = Given;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field's value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Given, E> {
        Ok(Given::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Given, E> {
        Ok(Given::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Given, D::Error> {
        Given::deserialize_from(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Given, E> {
        Ok(Given::Switch(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Given, E> {
        Ok(Given::Text(v.to_string()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Given, E> {
        Ok(Given::Text(v.to_string()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Given, E> {
        Ok(Given::Text(float_text(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Given, E> {
        Ok(Given::Text(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Given, E> {
        Ok(Given::Text(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Given, A::Error> {
        let (mut texts, mut other, mut any) = (Vec::new(), false, false);
        while let Some(item) = seq.next_element::<Given>()? {
            any = true;
            match item {
                Given::Text(t) => texts.push(t),
                _ => other = true,
            }
        }
        Ok(match (any, other) {
            (false, _) => Given::EmptyList,
            (true, true) => Given::Other,
            (true, false) => Given::List(texts),
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Given, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Given::Other)
    }
}

impl Given {
    fn deserialize_from<'de, D: Deserializer<'de>>(d: D) -> Result<Given, D::Error> {
        d.deserialize_any(GivenVisitor)
    }
}
