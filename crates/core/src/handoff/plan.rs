//! The Handoff loop's decisions, pure: what the reconcile observed
//! ([`Observed`]) → the effects ([`Plan`]), tested as tables. The I/O
//! around them is `handoff_controller::handoff`.
//!
//! One decision needs an outcome of I/O: the `Mirrored` condition is the
//! result of this reconcile's row write, and goes out in the same status
//! write as the count (two writes per agent write, not three). So the plan
//! is made in two steps: [`counting`] (the counted status, and whether the
//! row is to be written) and, once the row write answered, [`plan`] (every
//! effect). The `Mirrored` condition is always the outcome of a write made
//! now, or the condition the object already carries when its row is known
//! current; a failure is never read from anything but the write that failed.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::cached::{CachedHandoff, Mirrored};
use super::conditions::{mirrored_condition, unbound_condition};
use super::count::{Change, count};
use super::metadata::metadata_plan;
use super::view::written_at;
use super::{KEY_BOUND, MIRRORED, NOTE_KEY_CHARS};
use crate::api::naming::name_for_key;
use crate::api::{Handoff, HandoffSpec, HandoffStatus, set_condition};
use crate::loops::quoted;
use crate::settings::Budget;

/// Whether the reconcile of `cached` needs the object's body, so must
/// fetch the object: when it must count (never counted, or not at this
/// generation: the spec changed), or when the mirror row is not known to be
/// current — `mirror` on and the `Mirrored` condition not True for this
/// generation, or `owed` (this process has mirror work for the key that
/// failed: say, the history append after the status write). With the
/// mirror off, a `Mirrored` condition left by an earlier run is to be
/// removed, which rewrites the status. A counted, mirrored object (every
/// one, after a restart) needs nothing but the label step: no GET, no write.
/// An object whose name is not derived from its key is never mirrored: it
/// needs its body until it is counted, reported (`KeyBound` False) and has
/// no `Mirrored` condition.
pub(crate) fn needs_body(cached: &CachedHandoff, mirror: bool, owed: bool) -> bool {
    if !cached.canonical {
        return !(cached.counted && cached.unbound_reported && cached.mirrored == Mirrored::Absent);
    }
    let mirrored = match (mirror, cached.mirrored) {
        (true, Mirrored::Current) => !owed,
        (true, _) => false,
        (false, mirrored) => mirrored == Mirrored::Absent,
    };
    !(cached.counted && mirrored)
}

fn writer(spec: &HandoffSpec) -> &str {
    spec.created_by
        .as_deref()
        .filter(|w| !w.is_empty())
        .unwrap_or("an unknown writer")
}

/// What a reconcile observed of one Handoff.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The object, fetched (with its body): the cache said it is to be
    /// counted or mirrored ([`cached_plan`]).
    pub handoff: &'a Handoff,
    /// Whether it is its key's handoff ([`super::canonical`]), as the
    /// cached copy says ([`CachedHandoff::canonical`]): name and key never
    /// change, so a reconcile works it out once.
    pub canonical: bool,
    /// The namespace's lint budget.
    pub budget: &'a Budget,
    /// Whether the mirror is on.
    pub mirror: bool,
    /// The controller's clock.
    pub now: Timestamp,
}

/// The first step of the plan: the status as counted, before the row write.
#[derive(Debug, Clone, PartialEq)]
pub struct Counting {
    /// The counted status (its `Mirrored` condition as found; dropped with
    /// the mirror off).
    pub status: HandoffStatus,
    /// What counting found.
    pub(crate) change: Change,
    /// Whether the row of the counted object is to be written now.
    pub write_row: bool,
}

/// What this reconcile's row write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirroring {
    /// No row was written (mirror off, or the row is current).
    Skipped,
    /// The row holds `revision`; `history` when that revision is to be
    /// appended to the history (an uncounted object has no row: `false`).
    Written {
        /// The revision the row holds.
        revision: i64,
        /// Whether the history append follows.
        history: bool,
    },
    /// The write failed, for this reason.
    Failed(String),
}

/// Every effect of one reconcile, in the order the apply carries them out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// The status to write (a merge patch conditional on the resourceVersion
    /// read), or `None` when it is unchanged.
    pub status: Option<HandoffStatus>,
    /// The note of the `Superseded` Event, recorded after the status write.
    pub superseded: Option<String>,
    /// The note of the `NameNotDerivedFromKey` Warning Event, recorded
    /// after the status write that first reports the object.
    pub unbound: Option<String>,
    /// A revision was counted (the metric), after the status write.
    pub counted: bool,
    /// The metadata apply ([`metadata_plan`]).
    pub labels: Option<serde_json::Value>,
    /// Append the written row's revision to the history, after the status
    /// write (so a number is never recorded for content the apiserver does
    /// not hold).
    pub history: bool,
    /// Fail the reconcile after the rest (retried with backoff): the row
    /// write failed.
    pub retry: bool,
}

/// The plan when the cached copy is enough, or `None` when the object is
/// to be fetched and counted or mirrored ([`needs_body`]; `owed`: the
/// loop's backlog holds mirror work for its key). A terminating object
/// gets nothing (its delete event removes the row); a settled one only the
/// label apply it may need.
pub fn cached_plan(cached: &CachedHandoff, mirror: bool, owed: bool) -> Option<Plan> {
    if cached.terminating() {
        return Some(Plan::default());
    }
    (!needs_body(cached, mirror, owed)).then(|| Plan {
        labels: cached.labels.clone(),
        ..Plan::default()
    })
}

/// The first step for a fetched object: the counted status and whether the
/// row is to be written (with the mirror on, for the key's handoff only;
/// another object is reported by its `KeyBound` condition instead).
pub fn counting(observed: &Observed<'_>) -> Counting {
    let h = observed.handoff;
    let written = written_at(h).map_or(observed.now, |t| t.0);
    let (mut status, change) = count(
        &h.spec,
        h.status.as_ref(),
        h.metadata.generation,
        observed.budget,
        written,
        observed.now,
    );
    let canonical = observed.canonical;
    if !observed.mirror || !canonical {
        status.conditions.retain(|c| c.type_ != MIRRORED);
    }
    if !canonical {
        set_condition(&mut status.conditions, unbound_condition(h, observed.now));
    }
    Counting {
        status,
        change,
        write_row: observed.mirror && canonical,
    }
}

/// The second step: every effect, given the row write's outcome.
pub fn plan(observed: &Observed<'_>, counting: Counting, mirroring: &Mirroring) -> Plan {
    let h = observed.handoff;
    let generation = h.metadata.generation;
    let mut status = counting.status;
    let (history, retry) = match mirroring {
        Mirroring::Skipped => (false, false),
        Mirroring::Written { revision, history } => {
            let message = format!("the mirror row holds revision {revision}");
            set_condition(
                &mut status.conditions,
                mirrored_condition(true, message, generation, observed.now),
            );
            (*history, false)
        }
        Mirroring::Failed(reason) => {
            set_condition(
                &mut status.conditions,
                mirrored_condition(false, reason.clone(), generation, observed.now),
            );
            (false, true)
        }
    };
    let status = (h.status.as_ref() != Some(&status)).then_some(status);
    let written = status.is_some();
    let canonical = observed.canonical;
    let reported = h.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == KEY_BOUND && c.status == "False")
    });
    let unbound = (!canonical && written && !reported).then(|| {
        format!(
            "Handoff {} holds key {} but its name is not {:?}, the name derived from the key: \
             it is neither mirrored nor listed; delete it (the key's handoff stays)",
            h.name_any(),
            quoted(&h.spec.handoff_key, NOTE_KEY_CHARS),
            name_for_key(&h.spec.handoff_key),
        )
    });
    let superseded = match &counting.change {
        // A creation has no Event: status revision 1, `updatedAt`, the
        // mirror's history and the audit log record it.
        Change::Superseded { from, to } if written && canonical => Some(format!(
            "Handoff {}: revision {from} superseded by revision {to} (written by {})",
            quoted(&h.spec.handoff_key, NOTE_KEY_CHARS),
            writer(&h.spec)
        )),
        _ => None,
    };
    Plan {
        status,
        superseded,
        unbound,
        counted: written && counting.change != Change::Unchanged,
        labels: metadata_plan(h),
        history,
        retry,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;
    use crate::api::naming::labels_for;
    use crate::handoff::canonical;
    use crate::handoff::fixture::{at, spec};
    use crate::names::CONTROLLER_FIELD_MANAGER;
    use MirrorSetting::{Off, On, Owed};

    /// The mirror in a case: off, on, or on with mirror work owed for the
    /// key (the loop's backlog holds a failed write of it).
    #[derive(Debug, Clone, Copy)]
    enum MirrorSetting {
        Off,
        On,
        Owed,
    }

    impl MirrorSetting {
        /// `(mirror on, mirror work owed)`, as [`needs_body`] and
        /// [`cached_plan`] take them.
        fn flags(self) -> (bool, bool) {
            match self {
                Off => (false, false),
                On => (true, false),
                Owed => (true, true),
            }
        }
    }

    #[test]
    fn the_body_is_needed_to_count_or_to_mirror() {
        let condition = |ok: bool, generation: i64| {
            mirrored_condition(ok, String::new(), Some(generation), at(1))
        };
        let object = |generation: i64, status: Option<(i64, Vec<Condition>)>| {
            let mut h = Handoff::new(&name_for_key("k"), spec("b"));
            h.metadata.generation = Some(generation);
            h.status = status.map(|(observed, conditions)| {
                let (mut counted, _) = count(
                    &h.spec,
                    None,
                    Some(observed),
                    &Budget::default_budget(),
                    at(1),
                    at(1),
                );
                counted.conditions = conditions;
                counted
            });
            h
        };
        let legacy = {
            let mut h = object(2, Some((2, vec![condition(true, 2)])));
            if let Some(s) = h.status.as_mut() {
                s.content_hash = None;
            }
            h
        };
        let cases = [
            // (object, the mirror, needs the body, why)
            (object(1, None), On, true, "never counted"),
            (
                object(2, Some((1, vec![condition(true, 1)]))),
                On,
                true,
                "the spec changed",
            ),
            (legacy, On, true, "a status without a hash is recounted"),
            (
                object(2, Some((2, vec![condition(true, 2)]))),
                On,
                false,
                "counted and mirrored",
            ),
            (
                object(2, Some((2, vec![condition(true, 2)]))),
                Owed,
                true,
                "mirror work owed",
            ),
            (
                object(2, Some((2, vec![condition(false, 2)]))),
                On,
                true,
                "the mirror failed",
            ),
            (
                object(2, Some((2, vec![condition(true, 1)]))),
                On,
                true,
                "mirrored an older generation",
            ),
            (object(2, Some((2, vec![]))), On, true, "never mirrored"),
            (
                object(2, Some((2, vec![]))),
                Off,
                false,
                "counted, no mirror",
            ),
            (
                object(2, Some((2, vec![condition(true, 2)]))),
                Off,
                true,
                "a stale condition to drop",
            ),
        ];
        for (h, setting, want, why) in cases {
            let (mirror, owed) = setting.flags();
            assert_eq!(
                needs_body(&CachedHandoff::of(&h), mirror, owed),
                want,
                "{why}"
            );
        }
        // An object whose name is not derived from its key: never mirrored.
        let twin = |status: Option<(i64, Vec<Condition>)>| {
            let mut h = object(2, status);
            h.metadata.name = Some("my-handoff".into());
            h
        };
        let unbound = |h: &Handoff| unbound_condition(h, at(1));
        let reported = {
            let mut h = twin(Some((2, vec![])));
            let c = unbound(&h);
            if let Some(s) = h.status.as_mut() {
                s.conditions.push(c);
            }
            h
        };
        let reported_mirrored = {
            let mut h = reported.clone();
            if let Some(s) = h.status.as_mut() {
                s.conditions.push(condition(true, 2));
            }
            h
        };
        let cases = [
            (twin(None), true, "never counted"),
            (twin(Some((2, vec![]))), true, "counted, not reported"),
            (
                reported_mirrored,
                true,
                "reported, but a Mirrored condition (from before) to drop",
            ),
            (reported, false, "counted and reported"),
        ];
        for (h, want, why) in cases {
            for setting in [On, Owed, Off] {
                let (mirror, owed) = setting.flags();
                assert_eq!(
                    needs_body(&CachedHandoff::of(&h), mirror, owed),
                    want,
                    "twin: {why} (mirror {setting:?})"
                );
            }
        }
    }

    /// A stored handoff as the bridge writes it (labels applied).
    fn stored(body: &str, generation: i64) -> Handoff {
        let mut h = Handoff::new(&name_for_key("k"), spec(body));
        h.metadata.namespace = Some("ns".into());
        h.metadata.uid = Some("u".into());
        h.metadata.generation = Some(generation);
        h.metadata.resource_version = Some("7".into());
        h.metadata.labels = Some(labels_for("p", Some("org/repo"), Some("issue")));
        h
    }

    /// `h` counted at `observed` (its content then `body`), with a
    /// `Mirrored` condition (True: row current; False: a failed write) of
    /// generation `observed`.
    fn counted_as(mut h: Handoff, body: &str, observed: i64, mirrored: Option<bool>) -> Handoff {
        let (mut status, _) = count(
            &spec(body),
            None,
            Some(observed),
            &Budget::default_budget(),
            at(1),
            at(1),
        );
        if let Some(ok) = mirrored {
            let message = if ok {
                "the mirror row holds revision 1"
            } else {
                "down"
            };
            set_condition(
                &mut status.conditions,
                mirrored_condition(ok, message.into(), Some(observed), at(1)),
            );
        }
        h.status = Some(status);
        h
    }

    /// Both steps of the plan for a fetched `h`, at 10 with the default
    /// budget, the row write having done `mirroring`: whether the row is to
    /// be written, and the plan.
    fn planned(h: &Handoff, mirror: bool, mirroring: &Mirroring) -> (bool, Plan) {
        let budget = Budget::default_budget();
        let observed = Observed {
            handoff: h,
            canonical: canonical(h),
            budget: &budget,
            mirror,
            now: at(10),
        };
        let counted = counting(&observed);
        (counted.write_row, plan(&observed, counted, mirroring))
    }

    /// The condition of type `type_` in `status`, if any.
    fn condition<'a>(status: &'a HandoffStatus, type_: &str) -> Option<&'a Condition> {
        status.conditions.iter().find(|c| c.type_ == type_)
    }

    /// What a plan does, in short.
    #[derive(Debug, Default, PartialEq)]
    struct Seen {
        /// The row is written.
        row: bool,
        /// The status patch: its revision and `Mirrored` status.
        status: Option<(Option<i64>, Option<String>)>,
        superseded: bool,
        counted: bool,
        labels: bool,
        history: bool,
        retry: bool,
        /// The `KeyBound` status written.
        key_bound: Option<String>,
        /// The `NameNotDerivedFromKey` Warning Event.
        warned: bool,
    }

    /// One thing a plan does, for a table row to list (`seen`).
    enum Effect {
        Row,
        /// A status patch of this revision, with this `Mirrored` status
        /// (`None`: no such condition).
        Status(i64, Option<&'static str>),
        Superseded,
        Counted,
        Labels,
        History,
        Retry,
        /// The status carries `KeyBound` False: the object's name is not
        /// derived from its key.
        Unbound,
        Warned,
    }

    /// What a plan that does `effects`, and nothing else, does.
    fn seen(effects: &[Effect]) -> Seen {
        let mut seen = Seen::default();
        for effect in effects {
            match effect {
                Effect::Row => seen.row = true,
                Effect::Status(revision, mirrored) => {
                    seen.status = Some((Some(*revision), mirrored.map(str::to_owned)));
                }
                Effect::Superseded => seen.superseded = true,
                Effect::Counted => seen.counted = true,
                Effect::Labels => seen.labels = true,
                Effect::History => seen.history = true,
                Effect::Retry => seen.retry = true,
                Effect::Unbound => seen.key_bound = Some("False".into()),
                Effect::Warned => seen.warned = true,
            }
        }
        seen
    }

    #[test]
    fn every_transition_of_the_handoff_loop_is_planned() {
        use Effect::{Counted, History, Labels, Retry, Row, Status, Superseded, Unbound, Warned};
        let ok = |revision| Mirroring::Written {
            revision,
            history: true,
        };
        let down = Mirroring::Failed("PostgreSQL unavailable".into());
        let unlabelled = {
            let mut h = counted_as(stored("b", 1), "b", 1, Some(true));
            h.metadata.labels = None;
            h
        };
        let terminating = {
            let mut h = stored("b", 1);
            h.metadata.deletion_timestamp = Some(Time(at(5)));
            h
        };
        let settled = counted_as(stored("b", 1), "b", 1, Some(true));
        let named = |mut h: Handoff, name: &str| {
            h.metadata.name = Some(name.into());
            h
        };
        // A twin: a name of its own, another object's key ("k").
        let twin = named(stored("b", 1), "my-handoff");
        // A squat: the name of key "k2", holding key "k".
        let squat = named(stored("b", 1), &name_for_key("k2"));
        // Mirrored before the mirror refused it.
        let twin_mirrored = named(settled.clone(), "my-handoff");
        let twin_reported = {
            let mut h = named(counted_as(stored("b", 1), "b", 1, None), "my-handoff");
            let c = unbound_condition(&h, at(1));
            if let Some(s) = h.status.as_mut() {
                s.conditions.push(c);
            }
            h
        };
        let twin_changed = {
            let mut h = twin_reported.clone();
            h.spec.body = "c".into();
            h.metadata.generation = Some(2);
            h
        };
        let mirrored = |revision| Status(revision, Some("True"));
        let not_mirrored = |revision| Status(revision, Some("False"));
        let status = |revision| Status(revision, None);
        // (why, object, the mirror, the row write's outcome, what the plan
        // does)
        let cases = [
            (
                "new: revision 1, the row written, its history, no Event",
                stored("b", 1),
                On,
                ok(1),
                seen(&[Row, mirrored(1), Counted, History]),
            ),
            (
                "counted and mirrored: nothing",
                settled.clone(),
                On,
                Mirroring::Skipped,
                seen(&[]),
            ),
            (
                "relabel: only the labels",
                unlabelled,
                On,
                Mirroring::Skipped,
                seen(&[Labels]),
            ),
            (
                "mirror pending (owed): the row and history again, the status as it is",
                settled.clone(),
                Owed,
                ok(1),
                seen(&[Row, History]),
            ),
            (
                "mirror failed: counted, Mirrored False, retried, no history",
                stored("b", 1),
                On,
                down.clone(),
                seen(&[Row, not_mirrored(1), Counted, Retry]),
            ),
            (
                "mirror failed again: the same status, retried",
                counted_as(stored("b", 1), "b", 1, Some(false)),
                On,
                Mirroring::Failed("down".into()),
                seen(&[Row, Retry]),
            ),
            (
                "mirror caught up: the earlier failure is not carried forward",
                counted_as(stored("b", 1), "b", 1, Some(false)),
                On,
                ok(1),
                seen(&[Row, mirrored(1), History]),
            ),
            (
                "new content: revision 2, Superseded, the row and history",
                counted_as(stored("c", 2), "b", 1, Some(true)),
                On,
                ok(2),
                seen(&[Row, mirrored(2), Superseded, Counted, History]),
            ),
            (
                "stale row (same content, a newer generation): rewritten, no revision",
                counted_as(stored("b", 2), "b", 1, Some(true)),
                On,
                ok(1),
                seen(&[Row, mirrored(1), History]),
            ),
            (
                "mirror off: a condition left by an earlier run goes",
                settled.clone(),
                Off,
                Mirroring::Skipped,
                seen(&[status(1)]),
            ),
            (
                "delete (terminating): nothing, the delete event removes the row",
                terminating,
                On,
                Mirroring::Skipped,
                seen(&[]),
            ),
            (
                "a twin: counted, KeyBound False and a Warning, never mirrored",
                twin,
                On,
                Mirroring::Skipped,
                seen(&[status(1), Counted, Unbound, Warned]),
            ),
            (
                "a squat: the same",
                squat,
                On,
                Mirroring::Skipped,
                seen(&[status(1), Counted, Unbound, Warned]),
            ),
            (
                "a twin mirrored before: its Mirrored condition goes, reported",
                twin_mirrored,
                On,
                Mirroring::Skipped,
                seen(&[status(1), Unbound, Warned]),
            ),
            (
                "a reported twin: nothing (not even with mirror work owed for its key)",
                twin_reported,
                Owed,
                Mirroring::Skipped,
                seen(&[]),
            ),
            (
                "a reported twin's new content: counted, no Superseded, no second Warning",
                twin_changed,
                On,
                Mirroring::Skipped,
                seen(&[status(2), Counted, Unbound]),
            ),
        ];
        for (why, h, setting, outcome, want) in cases {
            let (mirror, owed) = setting.flags();
            let (row, plan) = match cached_plan(&CachedHandoff::of(&h), mirror, owed) {
                Some(plan) => (false, plan),
                None => planned(&h, mirror, &outcome),
            };
            let status_of =
                |status: &HandoffStatus, type_| condition(status, type_).map(|c| c.status.clone());
            let got = Seen {
                row,
                status: plan
                    .status
                    .as_ref()
                    .map(|s| (s.revision, status_of(s, MIRRORED))),
                superseded: plan.superseded.is_some(),
                counted: plan.counted,
                labels: plan.labels.is_some(),
                history: plan.history,
                retry: plan.retry,
                key_bound: plan.status.as_ref().and_then(|s| status_of(s, KEY_BOUND)),
                warned: plan.unbound.is_some(),
            };
            assert_eq!(got, want, "{why}");
        }
    }

    #[test]
    fn the_superseded_note_names_the_key_the_revisions_and_the_writer() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let entry = |manager: &str, fields, subresource: Option<&str>, secs| ManagedFieldsEntry {
            manager: Some(manager.into()),
            fields_v1: Some(FieldsV1(fields)),
            subresource: subresource.map(Into::into),
            time: Some(Time(at(secs))),
            ..Default::default()
        };
        let spec_write = entry(
            "handoff-bridge",
            serde_json::json!({"f:spec": {"f:body": {}}}),
            None,
            7,
        );
        let status_write = entry(
            CONTROLLER_FIELD_MANAGER,
            serde_json::json!({"f:status": {}}),
            Some("status"),
            9,
        );
        // (managedFields, the new content's updated_at): when its spec was
        // written, not when it is counted (at 10); the clock only without
        // a record of the write.
        let cases = [(vec![spec_write, status_write], 7), (vec![], 10)];
        for (fields, dated) in cases {
            let mut h = counted_as(stored("c", 2), "b", 1, Some(true));
            h.metadata.managed_fields = Some(fields).filter(|f| !f.is_empty());
            let (_, plan) = planned(&h, false, &Mirroring::Skipped);
            assert_eq!(
                plan.superseded.as_deref(),
                Some("Handoff \"k\": revision 1 superseded by revision 2 (written by alice)")
            );
            let status = plan.status.expect("a status patch");
            assert_eq!(status.updated_at, Some(Time(at(dated))));
            assert_eq!(status.observed_generation, Some(2));
        }
    }

    #[test]
    fn a_twin_is_told_its_expected_name_and_how_to_go() {
        let mut h = stored("b", 1);
        h.metadata.name = Some("my-handoff".into());
        let expected = name_for_key("k");
        let (_, plan) = planned(&h, true, &Mirroring::Skipped);
        let status = plan.status.expect("a status patch");
        let condition = condition(&status, KEY_BOUND).expect("KeyBound");
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "NameNotDerivedFromKey")
        );
        assert_eq!(
            condition.message,
            format!(
                "metadata.name \"my-handoff\" is not \"{expected}\", the name derived from \
                 spec.handoffKey \"k\": this object is not the key's handoff, so it is neither \
                 mirrored nor listed. Remove it with `kubectl delete handoff my-handoff -n ns`; \
                 the key's handoff (at \"{expected}\") and its history stay"
            )
        );
        assert_eq!(
            plan.unbound.as_deref(),
            Some(
                format!(
                    "Handoff my-handoff holds key \"k\" but its name is not \"{expected}\", the \
                     name derived from the key: it is neither mirrored nor listed; delete it \
                     (the key's handoff stays)"
                )
                .as_str()
            )
        );
    }

    #[test]
    fn a_failed_row_write_says_why_in_the_condition() {
        let h = stored("b", 1);
        let failed = Mirroring::Failed("PostgreSQL unavailable".into());
        let (_, plan) = planned(&h, true, &failed);
        let status = plan.status.expect("a status patch");
        let condition = condition(&status, MIRRORED).expect("Mirrored");
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "MirrorUnavailable")
        );
        assert_eq!(condition.message, "PostgreSQL unavailable");
    }
}
