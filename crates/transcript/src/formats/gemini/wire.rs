//! The shapes of Gemini CLI's session records, read leniently (see
//! `crate::json`): a field of an unexpected type reads as absent, so one
//! odd field does not cost the record.
//!
//! Message content is a Gemini API `PartListUnion`: a string, one part,
//! or a list of parts and strings. A part is `{text}` (with `thought:
//! true` for a thought), `{functionCall}`, `{functionResponse}`,
//! `{inlineData}` or `{fileData}`; it has no `type` field, so the shared
//! `crate::json::Content` (typed blocks) does not fit it.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::json::{Flag, Loose, Text, ToolInput};

/// One line of a session file: a header (`sessionId`, `projectHash`, …,
/// or a whole session with `messages`), a metadata update (`$set`), a
/// rewind (`$rewindTo`) or a message (`id`). The message's own fields are
/// read from the same object.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Line<'a> {
    #[serde(rename = "$rewindTo", default, borrow)]
    pub(super) rewind_to: Text<'a>,
    #[serde(rename = "$set", default, borrow)]
    pub(super) set: Loose<Meta<'a>>,
    #[serde(flatten, borrow)]
    pub(super) meta: Meta<'a>,
    #[serde(flatten, borrow)]
    pub(super) message: Message<'a>,
}

/// Session metadata: the header's fields, and what a `$set` changes.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Meta<'a> {
    #[serde(rename = "sessionId", default, borrow)]
    pub(super) session_id: Text<'a>,
    #[serde(rename = "projectHash", default, borrow)]
    pub(super) project_hash: Text<'a>,
    /// The summary the CLI wrote for the session: its title.
    #[serde(default, borrow)]
    pub(super) summary: Text<'a>,
    /// `main` or `subagent`.
    #[serde(default, borrow)]
    pub(super) kind: Text<'a>,
    /// A checkpoint (in `$set`) or a whole session (in a header): every
    /// message, replacing what was read before.
    #[serde(default, borrow)]
    pub(super) messages: List<Loose<Message<'a>>>,
}

/// A message record.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Message<'a> {
    #[serde(default, borrow)]
    pub(super) id: Text<'a>,
    /// `user`, `gemini`, `info`, `error` or `warning`.
    #[serde(rename = "type", default, borrow)]
    pub(super) kind: Text<'a>,
    #[serde(default, borrow)]
    pub(super) content: Parts<'a>,
    /// What the user saw of their message (before `@file` expansions).
    #[serde(rename = "displayContent", default, borrow)]
    pub(super) display_content: Parts<'a>,
    #[serde(rename = "toolCalls", default, borrow)]
    pub(super) tool_calls: List<Loose<ToolCall<'a>>>,
    #[serde(default)]
    pub(super) thoughts: List<IgnoredAny>,
    /// The sub-agent a message belongs to.
    #[serde(rename = "agentId", default, borrow)]
    pub(super) agent_id: Text<'a>,
}

/// A tool call of a `gemini` message, with its outcome.
#[derive(Debug, Default, Deserialize)]
pub(super) struct ToolCall<'a> {
    #[serde(default, borrow)]
    pub(super) name: Text<'a>,
    #[serde(default, borrow)]
    pub(super) args: Loose<Args<'a>>,
    /// The response parts (`functionResponse`).
    #[serde(default, borrow)]
    pub(super) result: Parts<'a>,
    /// Set when the call ran a sub-agent.
    #[serde(rename = "agentId", default, borrow)]
    pub(super) agent_id: Text<'a>,
    #[serde(rename = "resultDisplay", default, borrow)]
    pub(super) result_display: Text<'a>,
}

/// A tool call's arguments: the shared hint, plus Gemini CLI's own names.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Args<'a> {
    #[serde(flatten, borrow)]
    pub(super) input: ToolInput<'a>,
    /// `list_directory`.
    #[serde(default, borrow)]
    pub(super) dir_path: Text<'a>,
    /// `read_file` of older releases.
    #[serde(default, borrow)]
    pub(super) absolute_path: Text<'a>,
    /// `invoke_agent` / `delegate_to_agent`: which sub-agent.
    #[serde(default, borrow)]
    pub(super) agent_name: Text<'a>,
}

impl Args<'_> {
    /// The most telling argument.
    pub(super) fn hint(&self) -> Option<&str> {
        self.input
            .hint()
            .or(self.dir_path.as_str())
            .or(self.absolute_path.as_str())
    }
}

/// One part of a message's content.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Part<'a> {
    #[serde(default, borrow)]
    pub(super) text: Text<'a>,
    #[serde(default)]
    pub(super) thought: Flag,
    #[serde(rename = "functionCall", default, borrow)]
    pub(super) function_call: Loose<FunctionCall<'a>>,
    #[serde(rename = "functionResponse", default, borrow)]
    pub(super) function_response: Loose<FunctionResponse<'a>>,
    #[serde(rename = "inlineData", default, borrow)]
    pub(super) inline_data: Loose<Inline<'a>>,
    #[serde(rename = "fileData", default)]
    pub(super) file_data: Loose<IgnoredAny>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct FunctionCall<'a> {
    #[serde(default, borrow)]
    pub(super) name: Text<'a>,
    #[serde(default, borrow)]
    pub(super) args: Loose<Args<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct FunctionResponse<'a> {
    #[serde(default, borrow)]
    pub(super) response: Loose<Response<'a>>,
}

/// A function response: `output` on success, `error` on failure.
#[derive(Debug, Default, Deserialize)]
pub(super) struct Response<'a> {
    #[serde(default, borrow)]
    pub(super) output: Text<'a>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct Inline<'a> {
    #[serde(rename = "mimeType", default, borrow)]
    pub(super) mime_type: Text<'a>,
}

/// Message content: a string, one part, or a list of parts and strings;
/// anything else reads as no parts.
#[derive(Debug, Default)]
pub(super) struct Parts<'a>(pub(super) Vec<Part<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Parts<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(PartsVisitor(PhantomData))
    }
}

struct PartsVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for PartsVisitor<'a> {
    type Value = Parts<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("message content")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Parts::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Parts::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Parts::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Parts::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Parts::default())
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Parts(vec![text_part(Cow::Borrowed(v))]))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Parts(vec![text_part(Cow::Owned(v.to_owned()))]))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Parts(vec![text_part(Cow::Owned(v))]))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut parts = Vec::new();
        while let Some(Parts(more)) = seq.next_element::<Parts<'a>>()? {
            parts.extend(more);
        }
        Ok(Parts(parts))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Part::deserialize(de::value::MapAccessDeserializer::new(map)).map(|part| Parts(vec![part]))
    }
}

fn text_part(text: Cow<'_, str>) -> Part<'_> {
    Part {
        text: Text(Some(text)),
        ..Part::default()
    }
}

/// A list field: its elements when it is an array, else none (`None`:
/// it was not an array).
#[derive(Debug)]
pub(super) struct List<T>(pub(super) Option<Vec<T>>);

impl<T> List<T> {
    pub(super) fn items(&self) -> &[T] {
        self.0.as_deref().unwrap_or_default()
    }
}

impl<T> Default for List<T> {
    fn default() -> Self {
        List(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ListVisitor(PhantomData))
    }
}

struct ListVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
    type Value = List<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(List::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(List::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(List::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(List::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(List::default())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(List::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<T>()? {
            items.push(item);
        }
        Ok(List(Some(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(List::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(json: &str) -> Vec<Option<String>> {
        let message: Message = serde_json::from_str(json).expect("a message");
        message
            .content
            .0
            .iter()
            .map(|p| p.text.as_str().map(str::to_owned))
            .collect()
    }

    #[test]
    fn content_is_a_string_a_part_or_a_list() {
        let cases: [(&str, Vec<Option<&str>>); 7] = [
            (r#"{"content":"hi"}"#, vec![Some("hi")]),
            (r#"{"content":{"text":"one"}}"#, vec![Some("one")]),
            (
                r#"{"content":[{"text":"a"},"b",{"functionResponse":{}}]}"#,
                vec![Some("a"), Some("b"), None],
            ),
            (r#"{"content":[[{"text":"nested"}]]}"#, vec![Some("nested")]),
            (r#"{"content":null}"#, vec![]),
            (r#"{"content":7}"#, vec![]),
            (r#"{}"#, vec![]),
        ];
        for (json, want) in cases {
            let want: Vec<Option<String>> =
                want.into_iter().map(|t| t.map(str::to_owned)).collect();
            assert_eq!(texts(json), want, "{json}");
        }
    }

    #[test]
    fn lists_of_another_shape_are_empty() {
        let cases = [
            (r#"{"toolCalls":[{"name":"a"},3,{"name":"b"}]}"#, 3),
            (r#"{"toolCalls":null}"#, 0),
            (r#"{"toolCalls":{"name":"a"}}"#, 0),
            (r#"{"toolCalls":"x"}"#, 0),
        ];
        for (json, want) in cases {
            let message: Message = serde_json::from_str(json).expect("a message");
            assert_eq!(message.tool_calls.items().len(), want, "{json}");
        }
    }

    #[test]
    fn args_hint_knows_gemini_names() {
        let cases = [
            (r#"{"command":"ls","dir_path":"/d"}"#, Some("ls")),
            (r#"{"dir_path":"/d"}"#, Some("/d")),
            (r#"{"absolute_path":"/f"}"#, Some("/f")),
            (r#"{"file_path":"/f"}"#, Some("/f")),
            (r#"{"other":1}"#, None),
        ];
        for (json, want) in cases {
            let args: Args = serde_json::from_str(json).expect("args");
            assert_eq!(args.hint(), want, "{json}");
        }
    }
}
