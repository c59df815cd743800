//! Lenient serde building blocks shared by the readers.
//!
//! Transcripts are written by other programs whose formats change without
//! notice. A strict derive rejects a whole record for one field of an
//! unexpected type; these wrappers read what they can and treat everything
//! else as absent, so that only lines that are not JSON objects are skipped.
//! They borrow from the line when the JSON string has no escapes, and skip
//! fields nobody asked for without building them, which keeps the readers
//! faster than parsing each line into a `serde_json::Value`.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Visitor methods that read every JSON scalar as `$absent`.
macro_rules! scalars_are {
    ($absent:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
}

/// Visitor methods that read every JSON string as `$absent`.
macro_rules! strings_are {
    ($absent:expr) => {
        fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
}

fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// A string field. Strings are kept; arrays are read as their string
/// elements joined by spaces (a shell command given as argv); anything else
/// reads as absent.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Text<'a>(pub Option<Cow<'a, str>>);

impl Text<'_> {
    pub(crate) fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }

    pub(crate) fn is(&self, value: &str) -> bool {
        self.as_str() == Some(value)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TextVisitor(PhantomData))
    }
}

struct TextVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for TextVisitor<'a> {
    type Value = Text<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalars_are!(Text(None));

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Borrowed(v))))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Owned(v.to_owned()))))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Text(Some(Cow::Owned(v))))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut parts: Vec<Cow<'a, str>> = Vec::new();
        while let Some(Text(part)) = seq.next_element::<Text<'a>>()? {
            parts.extend(part);
        }
        Ok(Text(
            (!parts.is_empty()).then(|| Cow::Owned(parts.join(" "))),
        ))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| Text(None))
    }
}

/// A boolean field: `true` only for JSON `true`.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(crate) struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(FlagVisitor)
    }
}

struct FlagVisitor;

impl<'de> Visitor<'de> for FlagVisitor {
    type Value = Flag;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Flag(v))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Flag(false))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Flag(false))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Flag(false))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Flag(false))
    }
    strings_are!(Flag(false));

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq).map(|()| Flag(false))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| Flag(false))
    }
}

/// An object field read as `T`; anything that is not an object reads as
/// absent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Loose<T>(pub Option<T>);

impl<T> Default for Loose<T> {
    fn default() -> Self {
        Loose(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LooseVisitor(PhantomData))
    }
}

struct LooseVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for LooseVisitor<T> {
    type Value = Loose<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalars_are!(Loose(None));
    strings_are!(Loose(None));

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq).map(|()| Loose(None))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Loose(Some(t)))
    }
}

/// Message content as the three agents write it: a plain string, or a list
/// of typed blocks (parts).
#[derive(Debug, Default)]
pub(crate) enum Content<'a> {
    #[default]
    Absent,
    Text(Cow<'a, str>),
    Blocks(Vec<Loose<Block<'a>>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ContentVisitor(PhantomData))
    }
}

struct ContentVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ContentVisitor<'a> {
    type Value = Content<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalars_are!(Content::Absent);

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Content::Text(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Content::Text(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Content::Text(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::new();
        while let Some(block) = seq.next_element::<Loose<Block<'a>>>()? {
            blocks.push(block);
        }
        Ok(Content::Blocks(blocks))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(|()| Content::Absent)
    }
}

/// One content block (Claude), content item (Codex) or part (Grok). Only
/// the fields some reader uses are read; tool results and their bulky
/// payloads are skipped unread.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Block<'a> {
    #[serde(rename = "type", default, borrow)]
    pub kind: Text<'a>,
    #[serde(default, borrow)]
    pub text: Text<'a>,
    /// Claude `tool_use`.
    #[serde(default, borrow)]
    pub name: Text<'a>,
    /// Claude `tool_use`: what its `tool_result` refers to.
    #[serde(default, borrow)]
    pub id: Text<'a>,
    /// Grok `tool-call`.
    #[serde(rename = "toolName", default, borrow)]
    pub tool_name: Text<'a>,
    #[serde(default, borrow)]
    pub input: Loose<ToolInput<'a>>,
    /// Grok `file`.
    #[serde(default, borrow)]
    pub filename: Text<'a>,
}

/// The arguments of a tool call, reduced to the one that best says what the
/// call did.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolInput<'a> {
    #[serde(default, borrow)]
    command: Text<'a>,
    #[serde(default, borrow)]
    cmd: Text<'a>,
    #[serde(default, borrow)]
    file_path: Text<'a>,
    #[serde(default, borrow)]
    notebook_path: Text<'a>,
    #[serde(default, borrow)]
    path: Text<'a>,
    #[serde(default, borrow)]
    pattern: Text<'a>,
    #[serde(default, borrow)]
    query: Text<'a>,
    #[serde(default, borrow)]
    url: Text<'a>,
    #[serde(default, borrow)]
    description: Text<'a>,
    #[serde(default, borrow)]
    prompt: Text<'a>,
    /// A sub-agent's message (Codex `spawn_agent`, `send_input`).
    #[serde(default, borrow)]
    message: Text<'a>,
    /// Claude Code `Task` / `Agent`: the kind of sub-agent.
    #[serde(default, borrow)]
    pub(crate) subagent_type: Text<'a>,
}

impl ToolInput<'_> {
    /// The most telling argument, in order of preference.
    pub(crate) fn hint(&self) -> Option<&str> {
        [
            &self.command,
            &self.cmd,
            &self.file_path,
            &self.notebook_path,
            &self.path,
            &self.pattern,
            &self.query,
            &self.url,
            &self.description,
            &self.prompt,
            &self.message,
        ]
        .into_iter()
        .filter_map(Text::as_str)
        .find(|s| !s.trim().is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default, Deserialize)]
    struct Probe<'a> {
        #[serde(default, borrow)]
        text: Text<'a>,
        #[serde(default)]
        flag: Flag,
        #[serde(default, borrow)]
        content: Content<'a>,
    }

    fn probe(json: &str) -> Probe<'_> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn text_reads_strings_and_argv_and_nothing_else() {
        let cases = [
            (r#"{"text":"hi"}"#, Some("hi")),
            (r#"{"text":"a\nb"}"#, Some("a\nb")),
            (r#"{"text":["bash","-lc","ls"]}"#, Some("bash -lc ls")),
            (r#"{"text":[1,{"a":2}]}"#, None),
            (r#"{"text":{"a":"b"}}"#, None),
            (r#"{"text":null}"#, None),
            (r#"{"text":12}"#, None),
            (r#"{}"#, None),
        ];
        for (json, want) in cases {
            assert_eq!(probe(json).text.as_str(), want, "{json}");
        }
    }

    #[test]
    fn text_borrows_when_unescaped() {
        let p = probe(r#"{"text":"plain"}"#);
        assert!(matches!(p.text.0, Some(Cow::Borrowed("plain"))));
    }

    #[test]
    fn flag_is_true_only_for_true() {
        let cases = [
            (r#"{"flag":true}"#, true),
            (r#"{"flag":false}"#, false),
            (r#"{"flag":"true"}"#, false),
            (r#"{"flag":1}"#, false),
            (r#"{"flag":[true]}"#, false),
            (r#"{"flag":{"x":true}}"#, false),
            (r#"{"flag":null}"#, false),
        ];
        for (json, want) in cases {
            assert_eq!(probe(json).flag, Flag(want), "{json}");
        }
    }

    #[test]
    fn content_is_string_blocks_or_absent() {
        assert!(matches!(probe(r#"{"content":"x"}"#).content, Content::Text(t) if t == "x"));
        assert!(matches!(probe(r#"{"content":7}"#).content, Content::Absent));
        assert!(matches!(
            probe(r#"{"content":{"a":1}}"#).content,
            Content::Absent
        ));
        let Content::Blocks(blocks) =
            probe(r#"{"content":[{"type":"text","text":"t"},3,"s",{"type":"image"}]}"#).content
        else {
            panic!("blocks expected");
        };
        let kinds: Vec<Option<&str>> = blocks
            .iter()
            .map(|b| b.0.as_ref().and_then(|b| b.kind.as_str()))
            .collect();
        assert_eq!(kinds, [Some("text"), None, None, Some("image")]);
    }

    #[test]
    fn tool_input_hint_prefers_the_command() {
        let cases = [
            (r#"{"command":"ls","description":"list"}"#, Some("ls")),
            (r#"{"file_path":"/a","content":"big"}"#, Some("/a")),
            (r#"{"description":"  ","prompt":"go"}"#, Some("go")),
            (r#"{"cmd":["git","status"]}"#, Some("git status")),
            (r#"{"other":1}"#, None),
        ];
        for (json, want) in cases {
            let input: ToolInput = serde_json::from_str(json).unwrap();
            assert_eq!(input.hint(), want, "{json}");
        }
    }
}
