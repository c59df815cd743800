//! Claude Code transcripts: `~/.claude/projects/<slug>/<session>.jsonl`.
//! See the module docs of the crate for what is kept and what is left out.

mod records;
mod said;

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::formats::{ContextLimit, Format, Home};
use crate::linear::read_lines;
use crate::writes::{WriteCheck, is_write_tool};
use crate::{Budget, Outcome};

/// Claude Code's row of the registry.
pub(crate) struct Transcripts;

impl Format for Transcripts {
    fn name(&self) -> &'static str {
        "claude"
    }

    fn label(&self) -> &'static str {
        "Claude Code"
    }

    fn home(&self) -> Home {
        Home {
            var: "CLAUDE_CONFIG_DIR",
            dir: ".claude",
        }
    }

    fn linearize(&self, reader: &mut dyn BufRead, budget: Budget) -> Outcome {
        read_lines(reader, &mut records::Claude::default(), budget)
    }

    fn locate(&self, root: &Path, session: &str, cwd: &Path) -> Option<PathBuf> {
        locate(root, session, cwd)
    }

    fn write_check(&self) -> Option<WriteCheck> {
        Some(wrote)
    }

    /// 10,000 characters (measured with Claude Code 2.1.332 in the agents
    /// tier).
    fn context_limit(&self) -> Option<ContextLimit> {
        Some(ContextLimit::Utf16(10_000))
    }

    /// Claude Code ignores a `systemMessage` from PreCompact and SessionEnd
    /// (it echoes their raw stdout after `/compact` and logs SessionEnd's).
    fn plain_notice(&self, event: &str) -> bool {
        matches!(event, "PreCompact" | "SessionEnd")
    }
}

/// Claude Code's directory name for a working directory: every character
/// that is not an ASCII letter or digit becomes '-'.
pub(crate) fn slug(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// `<root>/projects/<slug of cwd>/<session>.jsonl`, else the first project
/// directory holding `<session>.jsonl` (the slug rule has changed across
/// versions, and symlinked working directories slug differently).
pub(crate) fn locate(root: &Path, session: &str, cwd: &Path) -> Option<PathBuf> {
    let projects = root.join("projects");
    let file = format!("{session}.jsonl");
    let direct = projects.join(slug(cwd)).join(&file);
    if direct.is_file() {
        return Some(direct);
    }
    std::fs::read_dir(&projects)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path().join(&file))
        .find(|path| path.is_file())
}

/// A write shows as an assistant `tool_use` block of the tool with
/// `input.handoff_key` = the key, answered by a user `tool_result` block
/// with its `tool_use_id` that is not `is_error`.
fn wrote(record: &Value, key: &str, pending: &mut HashSet<String>) -> bool {
    let blocks = record["message"]["content"]
        .as_array()
        .into_iter()
        .flatten();
    for block in blocks {
        match block["type"].as_str() {
            Some("tool_use")
                if is_write_tool(block["name"].as_str())
                    && block["input"]["handoff_key"] == key =>
            {
                if let Some(id) = block["id"].as_str() {
                    pending.insert(id.to_owned());
                }
            }
            Some("tool_result")
                if block["is_error"] != Value::Bool(true)
                    && block["tool_use_id"]
                        .as_str()
                        .is_some_and(|id| pending.contains(id)) =>
            {
                return true;
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::said::{Said, classify, strip_reminders};
    use super::*;
    use crate::linear::{Disposition, Note};
    use crate::{AgentKind, Mark, Role, linearize};

    #[test]
    fn slug_cases() {
        let cases = [
            ("/home/me/proj", "-home-me-proj"),
            ("/tmp/a.b_c d", "-tmp-a-b-c-d"),
            ("C:\\work\\x", "C--work-x"),
        ];
        for (cwd, want) in cases {
            assert_eq!(slug(Path::new(cwd)), want);
        }
    }

    #[test]
    fn strip_reminders_cases() {
        let cases = [
            ("plain", "plain"),
            ("a<system-reminder>x</system-reminder>b", "ab"),
            ("<system-reminder>only</system-reminder>", ""),
            ("a\n<system-reminder>x\n</system-reminder>\nb", "a\n\nb"),
            ("keep<system-reminder>unterminated", "keep"),
            (
                "<system-reminder>1</system-reminder>x<system-reminder>2</system-reminder>y",
                "xy",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(strip_reminders(text), want, "{text:?}");
        }
    }

    fn read(lines: &[&str]) -> crate::Outcome {
        linearize(
            AgentKind::Claude,
            lines.join("\n").as_bytes(),
            Budget::UNLIMITED,
        )
    }

    #[test]
    fn record_dispositions() {
        let cases: [(&str, Disposition); 12] = [
            (
                r#"{"type":"user","message":{"content":"hi"}}"#,
                Disposition::Used,
            ),
            (
                r#"{"type":"user","isMeta":true,"message":{"content":"caveat"}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"user","message":{"content":"<local-command-stdout>$0</local-command-stdout>"}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"user","isSidechain":true,"message":{"content":"sub"}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hm"}]}}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"ls"}}]}}"#,
                Disposition::Used,
            ),
            (
                r#"{"type":"system","subtype":"compact_boundary"}"#,
                Disposition::Ignored,
            ),
            (
                r#"{"type":"summary","summary":"title"}"#,
                Disposition::Ignored,
            ),
            (r#"{"type":"brand-new"}"#, Disposition::Skipped),
            (r#"[1,2]"#, Disposition::Skipped),
            (r#"{"type":"user""#, Disposition::Skipped),
        ];
        for (line, want) in cases {
            let got = Disposition::of_one(&read(&[line]), line);
            assert_eq!(got, want, "{line}");
        }
    }

    #[test]
    fn user_text_is_sorted_into_requests_and_marked_turns() {
        // Text that names a tag is typed text: only a leading tag marks
        // what Claude Code recorded.
        let requests = [
            "fix the build",
            "please explain <bash-input>",
            "what does <command-name>x</command-name> do?",
        ];
        for text in requests {
            assert_eq!(classify(text), Said::Request(text), "{text:?}");
        }
        let interrupt = "[Request interrupted by user for tool use]";
        let hook = "Stop hook feedback:\n[x]: write it";
        let compact = "<command-message>compact</command-message>\n<command-name>/compact</command-name>\n<command-args></command-args>";
        let marked = [
            (
                "[Request interrupted by user]",
                Mark::Interrupt,
                "[Request interrupted by user]",
            ),
            (interrupt, Mark::Interrupt, interrupt),
            ("<bash-input>ls -la</bash-input>", Mark::Shell, "$ ls -la"),
            (
                "<bash-stdout>a\nb</bash-stdout><bash-stderr>oops</bash-stderr>",
                Mark::Shell,
                "a\nb\noops",
            ),
            (
                "<bash-stdout></bash-stdout><bash-stderr></bash-stderr>",
                Mark::Shell,
                "",
            ),
            (compact, Mark::Command, "/compact"),
            (
                "<command-name>review</command-name><command-args>PR 7</command-args>",
                Mark::Command,
                "/review PR 7",
            ),
            (hook, Mark::Hook, hook),
        ];
        for (text, mark, want) in marked {
            assert_eq!(
                classify(text),
                Said::Marked(mark, want.to_owned()),
                "{text:?}"
            );
        }
        let reports = [
            (
                "<task-notification>\n<task-id>a1</task-id>\n<tool-use-id>toolu_t</tool-use-id>\n<status>completed</status>\n<summary>Agent \"x\" finished</summary>\n<result>found it</result>\n</task-notification>",
                "toolu_t",
                "[completed] Agent \"x\" finished\n\nfound it",
            ),
            (
                "<task-notification><summary>Agent \"x\" stopped</summary></task-notification>",
                "",
                "Agent \"x\" stopped",
            ),
        ];
        for (text, call, report) in reports {
            let want = Said::Report {
                call,
                text: report.to_owned(),
            };
            assert_eq!(classify(text), want, "{text:?}");
        }
    }

    #[test]
    fn background_notifications_are_reports_never_requests() {
        // The 2.0 line: `<agent-notification>`, the result in a file.
        let agent = "<agent-notification>\n<agent-id>ad9c6de</agent-id>\n<output-file>/tmp/t/ad9c6de.output</output-file>\n<status>completed</status>\n<summary>Agent \"Survey the parser\" completed.</summary>\nRead the output file to retrieve the full result.\n</agent-notification>";
        // The 2.1 line, after the notice newer builds put first.
        let task = "No human input has occurred since the last turn.\n<task-notification>\n<task-id>b7</task-id>\n<tool-use-id>toolu_b</tool-use-id>\n<status>failed</status>\n<summary>Agent \"Fix it\" failed: timeout</summary>\n</task-notification>";
        let cases = [
            (
                agent,
                "ad9c6de",
                "[completed] Agent \"Survey the parser\" completed.\n\nfull result: /tmp/t/ad9c6de.output",
            ),
            (task, "toolu_b", "[failed] Agent \"Fix it\" failed: timeout"),
            (
                "<task-notification><task-id>c</task-id></task-notification>",
                "",
                "<task-notification><task-id>c</task-id></task-notification>",
            ),
        ];
        for (text, call, report) in cases {
            let want = Said::Report {
                call,
                text: report.to_owned(),
            };
            assert_eq!(classify(text), want, "{text:?}");
        }
        // Typed text that names a tag stays a request.
        let typed = "what is a <task-notification>?";
        assert_eq!(classify(typed), Said::Request(typed));
    }

    #[test]
    fn a_notification_turn_is_never_the_last_request() {
        let prompt = r#"{"type":"user","timestamp":"2026-12-05T03:00:00Z","message":{"content":"survey the parser"}}"#;
        let reply = r#"{"type":"assistant","timestamp":"2026-12-05T03:00:01Z","message":{"content":[{"type":"text","text":"Started a survey."}]}}"#;
        let notified = [
            r#"{"type":"user","timestamp":"2026-12-05T03:00:02Z","message":{"content":"<agent-notification>\n<agent-id>ad9</agent-id>\n<status>completed</status>\n<summary>Agent \"Survey\" completed.</summary>\nRead the output file to retrieve the full result.\n</agent-notification>"}}"#,
            r#"{"type":"user","isMeta":true,"origin":{"kind":"task-notification"},"timestamp":"2026-12-05T03:00:02Z","message":{"content":"A background task finished; no human input has occurred.\n<task-notification>\n<task-id>t1</task-id>\n<status>completed</status>\n<summary>Agent \"Survey\" finished</summary>\n<result>Tabs fail in lex().</result>\n</task-notification>"}}"#,
            r#"{"type":"user","origin":{"kind":"task-notification"},"timestamp":"2026-12-05T03:00:02Z","message":{"content":"Agent \"Survey\" finished."}}"#,
        ];
        let reports = [
            "[completed] Agent \"Survey\" completed.",
            "[completed] Agent \"Survey\" finished\n\nTabs fail in lex().",
            "Agent \"Survey\" finished.",
        ];
        for (line, report) in notified.into_iter().zip(reports) {
            let o = read(&[prompt, reply, line]);
            let last = o.turns.last().expect("a turn");
            assert_eq!(
                (last.role, last.text.as_str(), last.mark),
                (Role::Assistant, report, Some(Mark::Sidechain)),
                "{line}"
            );
            let source = crate::rescue::Source {
                agent: AgentKind::Claude,
                session: None,
                started: None,
            };
            let body = crate::rescue::body(&o, source, crate::rescue::DEFAULT_MAX_TOKENS);
            assert!(
                body.contains("\"survey the parser\""),
                "the last request is the user's: {body}"
            );
            assert!(!body.contains("notification>"), "{body}");
        }
    }

    #[test]
    fn sub_agents_are_kept_as_their_reports() {
        let task = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"toolu_t","name":"Task","input":{"description":"look","subagent_type":"Explore"}}]}}"#;
        let step = r#"{"type":"assistant","isSidechain":true,"agentId":"a1","message":{"content":[{"type":"text","text":"step"}]}}"#;
        let report = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_t","content":[{"type":"text","text":"found it"}]}]}}"#;
        let other = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"ignored"}]}}"#;
        let launched = r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"toolu_t","content":[{"type":"text","text":"Async agent launched successfully.\nagentId: a1"}]}]}}"#;
        let notified = r#"{"type":"user","message":{"content":"<task-notification>\n<tool-use-id>toolu_t</tool-use-id>\n<result>found it later</result>\n</task-notification>"}}"#;
        let sidechain = |text: &str, agent: &str| {
            (
                Role::Assistant,
                text.to_owned(),
                Some(Mark::Sidechain),
                Some(agent.to_owned()),
            )
        };
        let call = (Role::Assistant, String::new(), None, None);
        type Case<'a> = (
            &'a [&'a str],
            Vec<(Role, String, Option<Mark>, Option<String>)>,
        );
        let cases: [Case<'_>; 6] = [
            (
                &[task, launched, step, notified],
                vec![call.clone(), sidechain("found it later", "Explore")],
            ),
            (
                &[task, launched, step],
                vec![call.clone(), sidechain("step", "Explore")],
            ),
            (
                &[task, step, report],
                vec![call.clone(), sidechain("found it", "Explore")],
            ),
            (
                &[task, report, step],
                vec![call.clone(), sidechain("found it", "Explore")],
            ),
            (
                &[task, step],
                vec![call.clone(), sidechain("step", "Explore")],
            ),
            (&[task, other], vec![call]),
        ];
        for (lines, want) in cases {
            let o = read(lines);
            let got: Vec<_> = o
                .turns
                .iter()
                .map(|t| (t.role, t.text.clone(), t.mark, t.agent.clone()))
                .collect();
            assert_eq!(got, want, "{lines:?}");
            assert!(o.turns.len() <= o.used, "{lines:?}: {o:?}");
            assert!(o.is_balanced(), "{lines:?}");
        }
    }

    #[test]
    fn titles_and_references() {
        let cases: [(&[&str], Option<&str>, &[&str]); 5] = [
            (
                &[r#"{"type":"ai-title","aiTitle":"Fix it"}"#],
                Some("Fix it"),
                &[],
            ),
            (
                &[
                    r#"{"type":"custom-title","customTitle":"Mine"}"#,
                    r#"{"type":"ai-title","aiTitle":"Fix it"}"#,
                ],
                Some("Mine"),
                &[],
            ),
            (
                &[
                    r#"{"type":"last-prompt","lastPrompt":"go on"}"#,
                    r#"{"type":"pr-link","prNumber":1,"prUrl":"https://x/pull/1"}"#,
                    r#"{"type":"last-prompt","lastPrompt":"go on"}"#,
                ],
                None,
                &["pull request: https://x/pull/1", "last prompt: go on"],
            ),
            (
                &[
                    r#"{"type":"last-prompt","lastPrompt":"first"}"#,
                    r#"{"type":"last-prompt","lastPrompt":"second"}"#,
                ],
                None,
                &["last prompt: second"],
            ),
            (&[r#"{"type":"last-prompt","leafUuid":"u"}"#], None, &[]),
        ];
        for (lines, title, refs) in cases {
            let o = read(lines);
            assert_eq!(o.title.as_deref(), title, "{lines:?}");
            assert_eq!(o.refs, refs, "{lines:?}");
            assert_eq!(o.skipped, 0, "{lines:?}");
        }
    }

    #[test]
    fn a_summary_is_a_marked_turn_of_its_own() {
        let summary = r#"{"type":"user","isCompactSummary":true,"message":{"content":"S"}}"#;
        let prompt = r#"{"type":"user","message":{"content":"next"}}"#;
        for (lines, at) in [([summary, prompt], 0), ([prompt, summary], 1)] {
            let o = read(&lines);
            assert_eq!(o.turns.len(), 2, "{lines:?}");
            assert_eq!(o.turns[at].text, "[compaction summary] S");
            assert_eq!(o.turns[at].mark, Some(Mark::Summary));
            assert_eq!(o.turns[1 - at].text, "next");
            assert_eq!(o.turns[1 - at].mark, None);
        }
    }

    #[test]
    fn meta_and_caveat_records_are_left_out_and_counted() {
        let caveat = "Caveat: The messages below were generated by the user while running local commands. DO NOT respond.";
        let meta = format!(r#"{{"type":"user","isMeta":true,"message":{{"content":"{caveat}"}}}}"#);
        let bare = format!(r#"{{"type":"user","message":{{"content":"{caveat}"}}}}"#);
        let blocks = format!(
            r#"{{"type":"user","message":{{"content":[{{"type":"text","text":"{caveat}"}},{{"type":"text","text":"real"}}]}}}}"#
        );
        let prompt = r#"{"type":"user","message":{"content":"hi"}}"#.to_owned();
        let warning = |n: usize| (n > 0).then(|| Note::Meta.describe(n));
        let cases: [(&[&String], &[&str], Option<String>); 5] = [
            (&[&prompt], &["hi"], warning(0)),
            (&[&meta, &prompt], &["hi"], warning(1)),
            (&[&bare, &prompt], &["hi"], warning(1)),
            (&[&blocks], &["real"], warning(1)),
            (&[&meta, &bare, &prompt], &["hi"], warning(2)),
        ];
        for (lines, want, warned) in cases {
            let lines: Vec<&str> = lines.iter().map(|l| l.as_str()).collect();
            let o = read(&lines);
            let texts: Vec<&str> = o.turns.iter().map(|t| t.text.as_str()).collect();
            assert_eq!(texts, want, "{lines:?}");
            let meta_warnings: Vec<&String> = o
                .warnings
                .iter()
                .filter(|w| w.contains("meta record"))
                .collect();
            assert_eq!(meta_warnings.first().copied(), warned.as_ref(), "{lines:?}");
        }
    }

    #[test]
    fn delivered_steering_messages_become_user_turns() {
        let prompt = r#"{"type":"user","message":{"content":"fix it"}}"#;
        let working = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"make"}}]}}"#;
        let enqueue = r#"{"type":"queue-operation","operation":"enqueue","content":"use clang"}"#;
        let remove = r#"{"type":"queue-operation","operation":"remove"}"#;
        let remove_own = r#"{"type":"queue-operation","operation":"remove","content":"stop"}"#;
        let dequeue = r#"{"type":"queue-operation","operation":"dequeue"}"#;
        let next = r#"{"type":"user","message":{"content":"use clang"}}"#;
        let reply = r#"{"type":"assistant","message":{"content":"Switching to clang."}}"#;
        let popall = r#"{"type":"queue-operation","operation":"popAll"}"#;
        let edited = r#"{"type":"queue-operation","operation":"enqueue","content":"use clang 18"}"#;
        // The lines, and the turns (role, text) they read as.
        type Case<'a> = (&'a [&'a str], &'a [(Role, &'a str)]);
        let cases: [Case<'_>; 7] = [
            (
                &[prompt, working, enqueue, remove, reply],
                &[
                    (Role::User, "fix it"),
                    (Role::Assistant, ""),
                    (Role::User, "use clang"),
                    (Role::Assistant, "Switching to clang."),
                ],
            ),
            (
                &[prompt, working, remove_own, reply],
                &[
                    (Role::User, "fix it"),
                    (Role::Assistant, ""),
                    (Role::User, "stop"),
                    (Role::Assistant, "Switching to clang."),
                ],
            ),
            (
                &[prompt, working, enqueue, dequeue, next, reply],
                &[
                    (Role::User, "fix it"),
                    (Role::Assistant, ""),
                    (Role::User, "use clang"),
                    (Role::Assistant, "Switching to clang."),
                ],
            ),
            (
                &[prompt, working, enqueue],
                &[(Role::User, "fix it"), (Role::Assistant, "")],
            ),
            (
                &[prompt, enqueue, dequeue, remove],
                &[(Role::User, "fix it")],
            ),
            (
                &[r#"{"type":"queue-operation","operation":"popAll","content":"x"}"#],
                &[],
            ),
            (
                &[prompt, working, enqueue, popall, edited, remove, reply],
                &[
                    (Role::User, "fix it"),
                    (Role::Assistant, ""),
                    (Role::User, "use clang 18"),
                    (Role::Assistant, "Switching to clang."),
                ],
            ),
        ];
        for (lines, want) in cases {
            let o = read(lines);
            let got: Vec<(Role, &str)> =
                o.turns.iter().map(|t| (t.role, t.text.as_str())).collect();
            assert_eq!(got, want, "{lines:?}");
            assert_eq!(o.skipped, 0, "{lines:?}");
        }
    }
}
