//! The budget: how much of a transcript a handoff carries.
//!
//! A destination agent needs the END of a session (where it stopped) more
//! than its beginning, and a long session does not fit its context. So the
//! readers keep a bounded tail while they stream: the tail holds at most
//! `max_turns` turns and `max_bytes` bytes of turn text, dropping the oldest
//! as new ones arrive. Memory therefore stays bounded by the budget, not by
//! the transcript, and the warnings say how much was cut.

use std::collections::VecDeque;

use super::{Role, Turn};

/// Turns kept by default: enough for the arc of a long session.
pub const DEFAULT_MAX_TURNS: usize = 200;
/// Bytes of turn text kept by default: about 24k tokens, which a destination
/// agent reads in a few file reads.
pub const DEFAULT_MAX_BYTES: usize = 96 * 1024;
/// Tool summaries kept per turn (the last ones): a long autonomous run is
/// otherwise one unbounded turn.
pub const MAX_TOOLS_PER_TURN: usize = 40;
/// Put in front of a turn whose beginning was cut.
const CUT_MARKER: &str = "[…] ";

/// Limits on the kept tail; `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_turns: Option<usize>,
    pub max_bytes: Option<usize>,
}

impl Budget {
    /// Keeps everything.
    pub const UNLIMITED: Budget = Budget {
        max_turns: None,
        max_bytes: None,
    };

    /// A budget from command-line numbers, where 0 means no limit.
    pub fn new(max_turns: usize, max_bytes: usize) -> Self {
        Budget {
            max_turns: (max_turns > 0).then_some(max_turns),
            max_bytes: (max_bytes > 0).then_some(max_bytes),
        }
    }
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(DEFAULT_MAX_TURNS, DEFAULT_MAX_BYTES)
    }
}

/// A turn being kept, and whether its start was cut.
#[derive(Debug)]
struct Slot {
    turn: Turn,
    head_cut: bool,
}

impl Slot {
    fn bytes(&self) -> usize {
        turn_bytes(&self.turn)
    }
}

/// The size a turn counts for in the budget: its text and tool summaries.
pub fn turn_bytes(turn: &Turn) -> usize {
    turn.text.len() + turn.tools.iter().map(String::len).sum::<usize>()
}

/// The bounded tail of turns, built while streaming. Content of the same
/// role as the open last turn joins it; [`Tail::close`] makes the next
/// content start a new turn.
#[derive(Debug)]
pub(crate) struct Tail {
    budget: Budget,
    slots: VecDeque<Slot>,
    bytes: usize,
    open: bool,
    seen: usize,
    cut_turns: usize,
    cut_bytes: usize,
    trimmed_bytes: usize,
    omitted_tools: usize,
}

impl Tail {
    pub fn new(budget: Budget) -> Self {
        Tail {
            budget,
            slots: VecDeque::new(),
            bytes: 0,
            open: false,
            seen: 0,
            cut_turns: 0,
            cut_bytes: 0,
            trimmed_bytes: 0,
            omitted_tools: 0,
        }
    }

    /// How many turns were started, kept or not.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// Adds text to the open turn of `role`, or starts one. Blank text is
    /// dropped.
    pub fn add_text(&mut self, role: Role, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        let slot = self.current(role);
        let before = slot.turn.text.len();
        if before > 0 {
            slot.turn.text.push_str("\n\n");
        }
        slot.turn.text.push_str(text);
        let added = slot.turn.text.len() - before;
        self.bytes += added;
        self.enforce();
    }

    /// Adds a tool summary to the open assistant turn, or starts one.
    pub fn add_tool(&mut self, summary: String) {
        let slot = self.current(Role::Assistant);
        let full = slot.turn.tools.len() >= MAX_TOOLS_PER_TURN;
        let removed = if full {
            slot.turn.tools.remove(0).len()
        } else {
            0
        };
        let added = summary.len();
        slot.turn.tools.push(summary);
        self.omitted_tools += usize::from(full);
        self.bytes = self.bytes + added - removed;
        self.enforce();
    }

    /// Ends the open turn.
    pub fn close(&mut self) {
        self.open = false;
    }

    /// The kept turns, oldest first, and what the budget cut.
    pub fn finish(mut self) -> (Vec<Turn>, Vec<String>) {
        if let Some(max) = self.budget.max_bytes {
            self.fit_last(max, max);
        }
        let mut warnings = Vec::new();
        if self.cut_turns > 0 {
            warnings.push(format!(
                "budget: kept the last {} of {} turns; the {} turns before them ({}) were cut",
                self.slots.len(),
                self.seen,
                self.cut_turns,
                human_bytes(self.cut_bytes)
            ));
        }
        if self.trimmed_bytes > 0 {
            warnings.push(format!(
                "budget: {} cut from the start of an over-long turn",
                human_bytes(self.trimmed_bytes)
            ));
        }
        if self.omitted_tools > 0 {
            warnings.push(format!(
                "{} earlier tool calls left out of long turns (the last {MAX_TOOLS_PER_TURN} of each turn are kept)",
                self.omitted_tools
            ));
        }
        let turns = self.slots.into_iter().map(finish_slot).collect();
        (turns, warnings)
    }

    fn current(&mut self, role: Role) -> &mut Slot {
        let reuse = self.open && self.slots.back().is_some_and(|s| s.turn.role == role);
        if !reuse {
            self.slots.push_back(Slot {
                turn: Turn {
                    role,
                    text: String::new(),
                    tools: Vec::new(),
                },
                head_cut: false,
            });
            self.open = true;
            self.seen += 1;
        }
        let last = self.slots.len() - 1;
        &mut self.slots[last]
    }

    fn enforce(&mut self) {
        if let Some(max) = self.budget.max_turns {
            while self.slots.len() > max {
                self.cut_front();
            }
        }
        if let Some(max) = self.budget.max_bytes {
            while self.bytes > max && self.slots.len() > 1 {
                self.cut_front();
            }
            // Trim a lone over-long turn only when it is twice the budget, so
            // that a turn growing by small pieces is not copied each time.
            self.fit_last(max.saturating_mul(2), max);
        }
    }

    fn cut_front(&mut self) {
        if let Some(slot) = self.slots.pop_front() {
            let bytes = slot.bytes();
            self.bytes -= bytes;
            self.cut_turns += 1;
            self.cut_bytes += bytes;
        }
    }

    /// When the lone remaining turn exceeds `threshold`, cuts it down to
    /// `max` bytes: first the start of its text, then its oldest tools.
    fn fit_last(&mut self, threshold: usize, max: usize) {
        if self.bytes <= threshold || self.slots.len() != 1 {
            return;
        }
        let Some(slot) = self.slots.back_mut() else {
            return;
        };
        // The marker needs room too, unless the budget is too small for it.
        let marked = max >= 2 * CUT_MARKER.len();
        let room = if marked { max - CUT_MARKER.len() } else { max };
        let excess = self.bytes.saturating_sub(room);
        let cut = ceil_char_boundary(&slot.turn.text, excess.min(slot.turn.text.len()));
        if cut > 0 {
            slot.turn.text.drain(..cut);
            slot.head_cut |= marked;
            self.trimmed_bytes += cut;
        }
        let mut bytes = slot.bytes();
        while bytes > room && !slot.turn.tools.is_empty() {
            bytes -= slot.turn.tools.remove(0).len();
            self.omitted_tools += 1;
        }
        self.bytes = bytes;
    }
}

/// The turn as handed out, a cut start marked.
fn finish_slot(slot: Slot) -> Turn {
    let mut turn = slot.turn;
    if slot.head_cut {
        turn.text.insert_str(0, CUT_MARKER);
    }
    turn
}

/// The smallest char boundary of `s` at or after `index`.
fn ceil_char_boundary(s: &str, index: usize) -> usize {
    (index..=s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len())
}

/// `n` bytes for a person: "512 bytes", "3.2 KB", "12.5 MB".
pub fn human_bytes(n: usize) -> String {
    const KB: f64 = 1024.0;
    let f = n as f64;
    if f < KB {
        format!("{n} bytes")
    } else if f < KB * KB {
        format!("{:.1} KB", f / KB)
    } else if f < KB * KB * KB {
        format!("{:.1} MB", f / (KB * KB))
    } else {
        format!("{:.1} GB", f / (KB * KB * KB))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(turns: &[Turn]) -> Vec<(Role, &str)> {
        turns.iter().map(|t| (t.role, t.text.as_str())).collect()
    }

    #[test]
    fn same_role_content_joins_the_open_turn() {
        let mut tail = Tail::new(Budget::UNLIMITED);
        tail.add_text(Role::User, "a");
        tail.add_text(Role::User, "b");
        tail.add_text(Role::Assistant, "c");
        tail.add_tool("[tool] t".into());
        tail.close();
        tail.add_text(Role::Assistant, "d");
        tail.add_text(Role::User, "  ");
        let (turns, warnings) = tail.finish();
        assert_eq!(
            texts(&turns),
            [
                (Role::User, "a\n\nb"),
                (Role::Assistant, "c"),
                (Role::Assistant, "d")
            ]
        );
        assert_eq!(turns[1].tools, ["[tool] t"]);
        assert!(warnings.is_empty());
    }

    #[test]
    fn max_turns_keeps_the_tail_and_says_so() {
        let mut tail = Tail::new(Budget::new(2, 0));
        for (i, role) in [Role::User, Role::Assistant, Role::User, Role::Assistant]
            .into_iter()
            .enumerate()
        {
            tail.add_text(role, &format!("t{i}"));
        }
        let (turns, warnings) = tail.finish();
        assert_eq!(texts(&turns), [(Role::User, "t2"), (Role::Assistant, "t3")]);
        assert_eq!(
            warnings,
            ["budget: kept the last 2 of 4 turns; the 2 turns before them (4 bytes) were cut"]
        );
    }

    #[test]
    fn max_bytes_keeps_whole_turns_that_fit() {
        let mut tail = Tail::new(Budget::new(0, 10));
        tail.add_text(Role::User, "aaaaaa");
        tail.add_text(Role::Assistant, "bbbb");
        tail.add_text(Role::User, "cccc");
        let (turns, warnings) = tail.finish();
        assert_eq!(
            texts(&turns),
            [(Role::Assistant, "bbbb"), (Role::User, "cccc")]
        );
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn a_lone_long_turn_keeps_its_end() {
        let mut tail = Tail::new(Budget::new(0, 20));
        tail.add_text(Role::User, &"x".repeat(100));
        tail.add_text(Role::User, "é-the end");
        let (turns, warnings) = tail.finish();
        assert_eq!(turns.len(), 1);
        assert!(turns[0].text.starts_with(CUT_MARKER));
        assert!(turns[0].text.ends_with("the end"));
        assert!(turn_bytes(&turns[0]) <= 20, "{}", turns[0].text);
        assert!(warnings[0].contains("cut from the start of an over-long turn"));
    }

    #[test]
    fn a_tiny_budget_is_never_exceeded() {
        for max in 1..16 {
            let mut tail = Tail::new(Budget::new(0, max));
            tail.add_text(Role::User, "0123456789abcdefghij");
            tail.add_tool("[tool] x".into());
            let (turns, _) = tail.finish();
            let bytes: usize = turns.iter().map(turn_bytes).sum();
            assert!(bytes <= max, "{max}: {turns:?}");
        }
    }

    #[test]
    fn long_tool_runs_keep_the_last_tools() {
        let mut tail = Tail::new(Budget::UNLIMITED);
        for i in 0..MAX_TOOLS_PER_TURN + 5 {
            tail.add_tool(format!("[tool] t{i}"));
        }
        let (turns, warnings) = tail.finish();
        let tools = &turns[0].tools;
        assert_eq!(tools.len(), MAX_TOOLS_PER_TURN);
        assert_eq!(tools[0], "[tool] t5");
        assert!(warnings[0].starts_with("5 earlier tool calls"));
    }

    #[test]
    fn budget_new_reads_zero_as_no_limit() {
        assert_eq!(Budget::new(0, 0), Budget::UNLIMITED);
        assert_eq!(
            Budget::new(3, 4),
            Budget {
                max_turns: Some(3),
                max_bytes: Some(4)
            }
        );
    }

    #[test]
    fn human_bytes_cases() {
        let cases = [
            (0, "0 bytes"),
            (1023, "1023 bytes"),
            (1024, "1.0 KB"),
            (1536, "1.5 KB"),
            (5 << 20, "5.0 MB"),
            (3 << 30, "3.0 GB"),
        ];
        for (n, want) in cases {
            assert_eq!(human_bytes(n), want);
        }
    }

    #[test]
    fn ceil_char_boundary_cases() {
        let s = "aé"; // 'é' spans bytes 1..3
        assert_eq!(ceil_char_boundary(s, 0), 0);
        assert_eq!(ceil_char_boundary(s, 1), 1);
        assert_eq!(ceil_char_boundary(s, 2), 3);
        assert_eq!(ceil_char_boundary(s, 9), 3);
    }
}
