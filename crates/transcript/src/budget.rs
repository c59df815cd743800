//! The budget: how much of a transcript a handoff carries.
//!
//! A destination agent needs the END of a session (where it stopped) more
//! than its beginning, and a long session does not fit its context. So the
//! readers keep a bounded tail while they stream: the tail holds at most
//! `max_turns` turns and `max_bytes` bytes of turn text, dropping the oldest
//! as new ones arrive; a single turn keeps at most a share of `max_bytes`
//! (its end, see [`MAX_TURN_SHARE`]), so one huge turn does not push out
//! the turns before it. Memory therefore stays bounded by the budget, not by
//! the transcript, and the warnings say how much was cut.

use std::collections::VecDeque;

use super::{Mark, Role, Turn};

/// Turns kept by default: enough for the arc of a long session.
pub(crate) const DEFAULT_MAX_TURNS: usize = 200;
/// Bytes of turn text kept by default: about 24k tokens, which a destination
/// agent reads in a few file reads.
pub const DEFAULT_MAX_BYTES: usize = 96 * 1024;
/// Tool summaries kept per turn (the last ones): a long autonomous run is
/// otherwise one unbounded turn.
pub(crate) const MAX_TOOLS_PER_TURN: usize = 40;
/// One turn keeps at most 1/`MAX_TURN_SHARE` of the byte budget (its end,
/// its start cut): a huge turn (a pasted log) would otherwise evict every
/// turn before it, while the destination needs the few exchanges that led
/// to the end to know where things stand. A quarter keeps the end of the
/// huge turn readable and leaves three quarters for the turns before it.
pub const MAX_TURN_SHARE: usize = 4;
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
    /// The bytes the turn will have as handed out, its cut marker included.
    fn bytes(&self) -> usize {
        let marker = if self.head_cut { CUT_MARKER.len() } else { 0 };
        turn_bytes(&self.turn) + marker
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
    pub(crate) fn new(budget: Budget) -> Self {
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
    pub(crate) fn seen(&self) -> usize {
        self.seen
    }

    /// Adds text to the open turn of `role`, or starts one. Blank text is
    /// dropped.
    pub(crate) fn add_text(&mut self, role: Role, text: &str) {
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

    /// Adds text as a marked turn of its own (see [`Mark`]), by `agent`
    /// when a sub-agent spoke. Blank text is dropped.
    pub(crate) fn add_marked(&mut self, role: Role, mark: Mark, agent: Option<&str>, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        self.close();
        let slot = self.current(role);
        slot.turn.mark = Some(mark);
        slot.turn.agent = agent.map(str::to_owned);
        slot.turn.text.push_str(text);
        self.bytes += text.len();
        self.close();
        self.enforce();
    }

    /// Adds a tool summary to the open assistant turn, or starts one.
    pub(crate) fn add_tool(&mut self, summary: String) {
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
    pub(crate) fn close(&mut self) {
        self.open = false;
    }

    /// The kept turns, oldest first, and what the budget cut.
    pub(crate) fn finish(mut self) -> (Vec<Turn>, Vec<String>) {
        if let Some(max) = self.budget.max_bytes {
            let cap = turn_cap(max);
            self.fit_last(cap, cap);
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
                "budget: {} cut from the start of over-long turns (a turn keeps at most 1/{MAX_TURN_SHARE} of the budget)",
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
            if let Some(max) = self.budget.max_bytes {
                let cap = turn_cap(max);
                self.fit_last(cap, cap);
            }
            self.slots.push_back(Slot {
                turn: Turn::new(role, String::new()),
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
            // Trim the open turn only when it is twice its share, so that a
            // turn growing by small pieces is not copied each time; then it
            // cannot evict the turns before it.
            let cap = turn_cap(max);
            self.fit_last(cap.saturating_mul(2), cap);
            while self.bytes > max && self.slots.len() > 1 {
                self.cut_front();
            }
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

    /// When the last turn exceeds `threshold`, cuts it down to `max` bytes:
    /// first the start of its text, then its oldest tools.
    fn fit_last(&mut self, threshold: usize, max: usize) {
        let Some(slot) = self.slots.back_mut() else {
            return;
        };
        let before = slot.bytes();
        if before <= threshold {
            return;
        }
        // The marker needs room too, unless the budget is too small for it.
        let marked = max >= 2 * CUT_MARKER.len();
        let room = if marked { max - CUT_MARKER.len() } else { max };
        let excess = turn_bytes(&slot.turn).saturating_sub(room);
        let cut = ceil_char_boundary(&slot.turn.text, excess.min(slot.turn.text.len()));
        if cut > 0 {
            slot.turn.text.drain(..cut);
            slot.head_cut |= marked;
            self.trimmed_bytes += cut;
        }
        while slot.bytes() > max && !slot.turn.tools.is_empty() {
            slot.turn.tools.remove(0);
            self.omitted_tools += 1;
        }
        self.bytes -= before - slot.bytes();
    }
}

/// The most bytes one turn keeps under a byte budget of `max`.
fn turn_cap(max: usize) -> usize {
    (max / MAX_TURN_SHARE).max(1)
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
pub(crate) fn human_bytes(n: usize) -> String {
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
        let mut tail = Tail::new(Budget::new(0, 40));
        tail.add_text(Role::User, "aaaaaaaaaa");
        tail.add_text(Role::Assistant, "bbbbbbbbbb");
        tail.add_text(Role::User, "cccccccccc");
        tail.add_text(Role::Assistant, "dddddddddd");
        tail.add_text(Role::User, "eeeeeeeeee");
        let (turns, warnings) = tail.finish();
        assert_eq!(
            texts(&turns),
            [
                (Role::Assistant, "bbbbbbbbbb"),
                (Role::User, "cccccccccc"),
                (Role::Assistant, "dddddddddd"),
                (Role::User, "eeeeeeeeee")
            ]
        );
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn a_lone_long_turn_keeps_its_end() {
        let mut tail = Tail::new(Budget::new(0, 80));
        tail.add_text(Role::User, &"x".repeat(400));
        tail.add_text(Role::User, "é-the end");
        let (turns, warnings) = tail.finish();
        assert_eq!(turns.len(), 1);
        assert!(turns[0].text.starts_with(CUT_MARKER));
        assert!(turns[0].text.ends_with("the end"));
        assert!(turn_bytes(&turns[0]) <= 20, "{}", turns[0].text);
        assert!(warnings[0].contains("cut from the start of over-long turns"));
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

    #[test]
    fn no_turn_takes_more_than_its_share_of_the_budget() {
        let huge = "h".repeat(5 * DEFAULT_MAX_BYTES);
        let small = "s".repeat(100);
        let share = DEFAULT_MAX_BYTES / MAX_TURN_SHARE;
        // (turn sizes in order, turns kept, size of the last kept turn)
        let cases: [(&[&str], usize, usize); 5] = [
            (&[&small, &small, &small, &huge], 4, share),
            (&[&huge], 1, share),
            (&[&small, &huge, &small], 3, 100),
            (&[&huge, &huge, &huge, &huge, &huge], MAX_TURN_SHARE, share),
            (&[&small, &small], 2, 100),
        ];
        for (sizes, kept, last) in cases {
            let mut tail = Tail::new(Budget::default());
            for (i, text) in sizes.iter().enumerate() {
                let role = if i % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                tail.add_text(role, text);
            }
            let (turns, _) = tail.finish();
            let lens: Vec<usize> = turns.iter().map(turn_bytes).collect();
            assert_eq!(turns.len(), kept, "{lens:?}");
            assert_eq!(lens.last().copied(), Some(last), "{lens:?}");
            assert!(lens.iter().all(|&n| n <= share), "{lens:?}");
            assert!(lens.iter().sum::<usize>() <= DEFAULT_MAX_BYTES, "{lens:?}");
        }
    }

    #[test]
    fn a_growing_turn_is_held_to_its_share() {
        let mut tail = Tail::new(Budget::new(0, 400));
        tail.add_text(Role::User, "question");
        for _ in 0..100 {
            tail.add_text(Role::Assistant, "0123456789");
        }
        let (turns, _) = tail.finish();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].text, "question");
        assert!(turns[1].text.starts_with(CUT_MARKER));
        assert_eq!(turn_bytes(&turns[1]), 400 / MAX_TURN_SHARE);
    }
}
