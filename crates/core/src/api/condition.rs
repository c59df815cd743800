//! Status conditions: the one rule every loop follows when it sets one.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Sets `condition` in `conditions`, replacing the one of the same type in
/// place (or appending it). `lastTransitionTime` moves only when `status`
/// changes: while it stays, the old time is kept and only `reason`,
/// `message` and `observedGeneration` are updated.
pub fn set_condition(conditions: &mut Vec<Condition>, mut condition: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(old) => {
            if old.status == condition.status {
                condition.last_transition_time = old.last_transition_time.clone();
            }
            *old = condition;
        }
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("timestamp"))
    }

    fn condition(
        type_: &str,
        status: &str,
        reason: &str,
        generation: i64,
        second: i64,
    ) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{reason} message"),
            observed_generation: Some(generation),
            last_transition_time: at(second),
        }
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let ready = |status, reason, generation, second| {
            condition("Ready", status, reason, generation, second)
        };
        let other = condition("Mirrored", "True", "RowCurrent", 1, 5);
        let cases = [
            // (name, before, set, after)
            (
                "a new type is appended",
                vec![other.clone()],
                ready("True", "Scheduled", 1, 10),
                vec![other.clone(), ready("True", "Scheduled", 1, 10)],
            ),
            (
                "same status: the old time is kept",
                vec![ready("True", "Scheduled", 1, 10)],
                ready("True", "Scheduled", 1, 20),
                vec![ready("True", "Scheduled", 1, 10)],
            ),
            (
                "same status: reason, message and generation update, the time stays",
                vec![ready("True", "Scheduled", 1, 10)],
                ready("True", "Rescheduled", 2, 20),
                vec![ready("True", "Rescheduled", 2, 10)],
            ),
            (
                "status changes: the time moves",
                vec![ready("True", "Scheduled", 1, 10)],
                ready("False", "InvalidSchedule", 2, 30),
                vec![ready("False", "InvalidSchedule", 2, 30)],
            ),
            (
                "replaced in place, other types untouched",
                vec![ready("False", "InvalidSchedule", 1, 10), other.clone()],
                ready("True", "Scheduled", 2, 40),
                vec![ready("True", "Scheduled", 2, 40), other.clone()],
            ),
            (
                "Unknown is a status of its own",
                vec![ready("True", "Scheduled", 1, 10)],
                ready("Unknown", "Pending", 1, 50),
                vec![ready("Unknown", "Pending", 1, 50)],
            ),
        ];
        for (name, before, set, after) in cases {
            let mut conditions = before;
            set_condition(&mut conditions, set);
            assert_eq!(conditions, after, "{name}");
        }
    }
}
